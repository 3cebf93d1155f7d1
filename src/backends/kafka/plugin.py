"""The Kafka backend as a plug-in: ``mq.type: default`` picks it when ``kafka.brokers`` is
set (after rocksmq and pulsar)."""

from __future__ import annotations

from ..broker_plugin import broker_spec
from .ids import KafkaMessageID
from .settings import KafkaConfig

SPEC = broker_spec(
    KafkaConfig,
    address_key="brokers",
    selection_rank=2,
    listing_position=1,
    client_class="KafkaClient",
    message_id_tag=KafkaMessageID.tag,
    reader_access="msgstream.backends.kafka.reader_access:READER_ACCESS",
)
