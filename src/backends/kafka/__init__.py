"""The Apache Kafka backend, on aiokafka.

A channel is a one-partition topic, created on first use; a MessageID is the record's
offset; a subscription is a consumer group whose committed offset is the acknowledged
position. Importing the package imports no broker library (loading the backend's spec and
config section must stay light); :mod:`.client` imports aiokafka (install
``msgstream[kafka]``), on first use of its names here.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import KafkaClient
    from .ids import KafkaMessageID

__all__ = ["KafkaClient", "KafkaMessageID"]


def __getattr__(name: str) -> Any:
    module = ".ids" if name == "KafkaMessageID" else ".client"
    return getattr(import_module(module, __name__), name)
