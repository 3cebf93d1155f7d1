"""The Pulsar backend as a plug-in: ``mq.type: default`` picks it when ``pulsar.address`` is
set (unless ``rocksmq.path`` is). Its MessageIDs are Pulsar's own, not tag + int64."""

from __future__ import annotations

from msgstream.plugins import BackendSpec

from .settings import PulsarConfig

SPEC = BackendSpec(
    name="pulsar",
    section=PulsarConfig,
    listing_position=2,
    client_factory="msgstream.backends.pulsar.client:new_client",
    extra="pulsar",
    selected_by="address",
    selection_rank=1,
    required_keys=("address",),
)
