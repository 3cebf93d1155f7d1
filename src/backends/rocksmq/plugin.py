"""The rocksmq backend as a plug-in: the fallback of ``mq.type: default``, and its first
choice whenever ``rocksmq.path`` is set."""

from __future__ import annotations

from msgstream.configuration.plugins import BackendSpec

from ..log_client.client import RocksmqMessageID
from .settings import RocksmqConfig

SPEC = BackendSpec(
    name="rocksmq",
    section=RocksmqConfig,
    listing_position=0,
    client_factory="msgstream.backends.rocksmq.client:new_client",
    inspection_client_factory="msgstream.backends.rocksmq.client:new_inspection_client",
    message_id_tag=RocksmqMessageID.tag,
    selected_by="path",
    selection_rank=0,
    fallback=True,
    reader_access="msgstream.backends.rocksmq.reader_access:READER_ACCESS",
    directory_key="path",
    errors="msgstream.backends.rocksmq.errors",
)
