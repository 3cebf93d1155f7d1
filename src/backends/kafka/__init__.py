"""The Apache Kafka backend, on aiokafka.

A channel is a one-partition topic, created on first use; a MessageID is the record's
offset; a subscription is a consumer group whose committed offset is the acknowledged
position. Importing the package imports no broker library (loading the backend's spec and
config section must stay light); :mod:`.client` imports aiokafka (install
``msgstream[kafka]``), on first use of its names here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgstream.runtime.exports import lazy_exports

if TYPE_CHECKING:
    from .client import KafkaClient as KafkaClient
    from .ids import KafkaMessageID as KafkaMessageID
else:
    __all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
