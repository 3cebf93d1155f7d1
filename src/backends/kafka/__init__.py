"""The Apache Kafka backend, on aiokafka.

A channel is a one-partition topic, created on first use; a MessageID is the record's
offset; a subscription is a consumer group whose committed offset is the acknowledged
position. Importing this module imports aiokafka (install ``msgstream[kafka]``).
"""

from __future__ import annotations

from msgstream.config import Config

from .client import KafkaClient
from .ids import KafkaMessageID

__all__ = ["KafkaClient", "KafkaMessageID", "new_client"]


def new_client(config: Config) -> KafkaClient:
    """A client of the cluster at ``kafka.brokers`` (connections open on first use)."""
    return KafkaClient(config)
