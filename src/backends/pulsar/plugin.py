"""The Pulsar backend as a plug-in: ``mq.type: default`` picks it when ``pulsar.address`` is
set (unless ``rocksmq.path`` is). Its MessageIDs are Pulsar's own, not tag + int64."""

from __future__ import annotations

from ..broker_plugin import broker_spec
from .settings import PulsarConfig

SPEC = broker_spec(
    PulsarConfig,
    address_key="address",
    selection_rank=1,
    listing_position=2,
    client_class="PulsarClient",
)
