"""Shared machinery of the two in-process backends (``memory`` and ``rocksmq``): a
``LogStore`` holds the channels, and one client/producer/consumer implementation runs
over any store, so both backends have exactly the same semantics."""

from .client import LocalClient, LocalConsumer, LocalMessageID, LocalProducer
from .store import LogStore, Record, StoredSubscription

__all__ = [
    "LocalClient",
    "LocalConsumer",
    "LocalMessageID",
    "LocalProducer",
    "LogStore",
    "Record",
    "StoredSubscription",
]
