"""Opening a backend for reading: the one backend-specific step of the bridge.

The embedded rocksmq store allows one writing process; Spark's Python workers (and an
ingest job next to a running producer) are other processes, so the bridge always opens
rocksmq read-only. A read-only store sees the writer's later messages only when it
catches up, which :attr:`ReaderClient.refresh` does before the bridge asks what is new.
Every other backend is opened through the ordinary factory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from msgstream.backend import Client
from msgstream.backends.rocksmq.settings import RocksmqConfig
from msgstream.config import Config, resolve_backend
from msgstream.factory import new_client

if TYPE_CHECKING:
    from msgstream.backends.rocksmq import RocksStore


def _nothing() -> None:
    return None


@dataclass
class ReaderClient:
    client: Client
    refresh: Callable[[], None] = _nothing
    """Make messages written by other processes since the last call visible."""


def resolved_config(config: Config) -> Config:
    """The same configuration with the backend and (for rocksmq) the store path made
    explicit, so a process with another environment opens the same thing."""
    backend = resolve_backend(config)
    resolved = config.replace(mq=config.mq.replace(type=backend))
    if backend == "rocksmq":
        rocksmq = config.section(RocksmqConfig)
        resolved = resolved.replace(rocksmq=rocksmq.replace(path=rocksmq.resolved_path()))
    return resolved


KAFKA_FETCH_BYTES = 16 << 20
"""A bridge reader's Kafka fetch size per partition (unless ``kafka.consumer`` sets
``max_partition_fetch_bytes``): it reads whole slices, and aiokafka's 1 MiB default
made a 10 MiB channel ten round trips to the broker (docs/benchmarks/code-notes.md)."""


def open_reader(config: Config) -> ReaderClient:
    """A client for reading the channels ``config`` points at (rocksmq: read-only;
    Kafka: large fetches, see :data:`KAFKA_FETCH_BYTES`)."""
    backend = resolve_backend(config)
    if backend == "kafka":
        return ReaderClient(new_client(_large_fetches(config)))
    if backend != "rocksmq":
        return ReaderClient(new_client(config))
    from msgstream.backends.rocksmq import RocksStore
    from msgstream.backends.rocksmq import new_client as new_rocksmq_client

    client = new_rocksmq_client(config.section(RocksmqConfig), config.msgstream, read_only=True)
    store = client.store
    assert isinstance(store, RocksStore)
    return ReaderClient(client, store.catch_up)


def _large_fetches(config: Config) -> Config:
    from msgstream.backends.kafka.settings import KafkaConfig

    kafka = config.section(KafkaConfig)
    if "max_partition_fetch_bytes" in kafka.consumer:
        return config
    consumer = {**kafka.consumer, "max_partition_fetch_bytes": KAFKA_FETCH_BYTES}
    return config.replace(kafka=kafka.replace(consumer=consumer))


def read_only_store(client: Client) -> RocksStore | None:
    """The read-only rocksmq store ``client`` reads, if that is what it reads."""
    if client.backend_name != "rocksmq":
        return None
    from msgstream.backends.rocksmq import RocksStore

    store = getattr(client, "store", None)
    return store if isinstance(store, RocksStore) and store.read_only else None


def in_process_only(config: Config) -> bool:
    """Whether the backend exists only inside this process (``memory``)."""
    return resolve_backend(config) == "memory"
