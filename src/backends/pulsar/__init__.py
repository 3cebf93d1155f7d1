"""The Apache Pulsar backend, on pulsar-client's ``pulsar.asyncio`` API.

A channel is a non-partitioned persistent topic under ``pulsar.tenant``/``pulsar.namespace``;
a MessageID is Pulsar's own (ledger, entry, batch index), serialised by Pulsar; a
subscription is a durable Pulsar subscription (exclusive by default) whose cumulative
acknowledgement is the position a reopened subscription resumes from. Importing this
module imports pulsar-client (install ``msgstream[pulsar]``).
"""

from __future__ import annotations

from msgstream.config import Config

from .client import PulsarClient
from .consumer import PulsarConsumer
from .ids import PulsarMessageID
from .producer import PulsarProducer

__all__ = ["PulsarClient", "PulsarConsumer", "PulsarMessageID", "PulsarProducer", "new_client"]


def new_client(config: Config) -> PulsarClient:
    """A client of the cluster at ``pulsar.address`` (connections open on first use)."""
    return PulsarClient(config)
