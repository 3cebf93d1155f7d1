"""The memory backend as a plug-in: only ever chosen by name (``mq.type: memory``); its
channels live in the process that made them."""

from __future__ import annotations

from msgstream.configuration.plugins import BackendSpec

from ..log_client.client import MemoryMessageID
from .settings import MemoryConfig

SPEC = BackendSpec(
    name="memory",
    section=MemoryConfig,
    listing_position=3,
    client_factory="msgstream.backends.memory:new_client",
    message_id_tag=MemoryMessageID.tag,
    in_process=True,
)
