"""The Apache Pulsar backend, on pulsar-client's ``pulsar.asyncio`` API.

A channel is a non-partitioned persistent topic under ``pulsar.tenant``/``pulsar.namespace``;
a MessageID is Pulsar's own (ledger, entry, batch index), serialised by Pulsar; a
subscription is a durable Pulsar subscription (exclusive by default) whose cumulative
acknowledgement is the position a reopened subscription resumes from. Importing the package
imports no broker library (loading the backend's spec and config section must stay light);
its names below import pulsar-client (install ``msgstream[pulsar]``) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgstream.runtime.exports import lazy_exports

if TYPE_CHECKING:
    from .client import PulsarClient as PulsarClient
    from .consumer import PulsarConsumer as PulsarConsumer
    from .ids import PulsarMessageID as PulsarMessageID
    from .producer import PulsarProducer as PulsarProducer
else:
    __all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
