"""The log client: the client, producer and consumer that the two in-process backends
(``memory`` and ``rocksmq``) share. A ``LogStore`` holds the channels; one implementation
runs over any store, so both backends have exactly the same semantics."""

from .client import LogClient, LogConsumer, LogMessageID, LogProducer
from .store import LogStore, Record, StoredSubscription

__all__ = [
    "LogClient",
    "LogConsumer",
    "LogMessageID",
    "LogProducer",
    "LogStore",
    "Record",
    "StoredSubscription",
]
