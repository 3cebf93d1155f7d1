"""The Kafka backend as a plug-in: ``mq.type: default`` picks it when ``kafka.brokers`` is
set (after rocksmq and pulsar)."""

from __future__ import annotations

from msgstream.plugins import BackendSpec

from .ids import KafkaMessageID
from .settings import KafkaConfig

SPEC = BackendSpec(
    name="kafka",
    section=KafkaConfig,
    listing_position=1,
    client_factory="msgstream.backends.kafka.client:new_client",
    message_id_tag=KafkaMessageID.tag,
    extra="kafka",
    selected_by="brokers",
    selection_rank=2,
    required_keys=("brokers",),
)
