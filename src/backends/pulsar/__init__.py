"""The Apache Pulsar backend, on pulsar-client's ``pulsar.asyncio`` API.

A channel is a non-partitioned persistent topic under ``pulsar.tenant``/``pulsar.namespace``;
a MessageID is Pulsar's own (ledger, entry, batch index), serialised by Pulsar; a
subscription is a durable Pulsar subscription (exclusive by default) whose cumulative
acknowledgement is the position a reopened subscription resumes from. Importing the package
imports no broker library (loading the backend's spec and config section must stay light);
its names below import pulsar-client (install ``msgstream[pulsar]``) on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import PulsarClient
    from .consumer import PulsarConsumer
    from .ids import PulsarMessageID
    from .producer import PulsarProducer

__all__ = ["PulsarClient", "PulsarConsumer", "PulsarMessageID", "PulsarProducer"]

_MODULES = {"PulsarConsumer": ".consumer", "PulsarMessageID": ".ids", "PulsarProducer": ".producer"}


def __getattr__(name: str) -> Any:
    return getattr(import_module(_MODULES.get(name, ".client"), __name__), name)
