"""The private attributes of aiokafka and pulsar-client that the backends read (through
``aiokafka_private`` and ``pulsar_private``), read here from the installed libraries
without a broker: an upgrade that moves one fails here, naming the library's version and
the attribute (PySpark's need a session: ``tests/spark/test_pyspark_internals.py``)."""

from __future__ import annotations

import inspect
from importlib.metadata import version

import pytest

from msgstream.errors import BackendUnavailableError
from msgstream.runtime.library_internals import LibraryInternalError, internal


def test_a_missing_internal_is_an_error_naming_the_library_release_and_attribute() -> None:
    class Wrapper:
        pass

    with pytest.raises(LibraryInternalError) as exc:
        internal(Wrapper(), "_inner", "pytest")
    assert str(exc.value) == (
        f"pytest {version('pytest')} has no Wrapper._inner, which msgstream reads (no public "
        "API does that job): install a release of pytest that msgstream supports"
    )
    assert isinstance(exc.value, BackendUnavailableError)
    assert (exc.value.distribution, exc.value.attribute) == ("pytest", "Wrapper._inner")
    with pytest.raises(LibraryInternalError, match=r"has no Wrapper\._inner"):
        internal(Wrapper, "_inner", "pytest")  # a class is named by itself


async def test_the_aiokafka_internals_are_there() -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient

    from msgstream.backends.kafka.aiokafka_private import admin_request_sender, metadata_client

    consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:9")  # never started: no broker
    client = metadata_client(consumer)
    assert list(inspect.signature(client.add_topic).parameters) == ["topic"]
    assert list(inspect.signature(client.force_metadata_update).parameters) == []
    assert callable(client.cluster.partitions_for_topic)
    admin = AIOKafkaAdminClient(bootstrap_servers="127.0.0.1:9")
    send = admin_request_sender(admin)
    assert inspect.iscoroutinefunction(send)
    assert list(inspect.signature(send).parameters) == ["request", "node_id"]
    await admin.close()


def test_the_pulsar_client_internals_are_there() -> None:
    from msgstream.backends.pulsar.library import _pulsar, pulsar, pulsar_asyncio
    from msgstream.backends.pulsar.pulsar_private import (
        native_client,
        native_consumer,
        native_producer,
    )

    client = pulsar_asyncio.Client("pulsar://127.0.0.1:9")  # connects on first use only
    native = native_client(client)
    assert isinstance(native, _pulsar.Client)
    native.close()
    # pulsar.asyncio wraps what the native client makes; wrappers made here by hand
    # (making real ones needs a broker) show where it keeps them.
    schema = pulsar.schema.BytesSchema()
    native_side = object()
    assert native_consumer(pulsar_asyncio.Consumer(native_side, schema)) is native_side
    assert callable(_pulsar.Consumer.receive_async)
    producer = _NativeProducer()
    found = native_producer(pulsar_asyncio.Producer(producer, schema))
    assert found is producer, (
        f"pulsar-client {version('pulsar-client')} keeps no Producer._producer: sends would "
        "fall back to the public send, one loop wake-up per message"
    )
    assert callable(_pulsar.Producer.send_async)


class _NativeProducer:
    """Stands for a ``_pulsar.Producer``: what ``native_producer`` checks it has."""

    def send_async(self) -> None:
        raise AssertionError("not called")
