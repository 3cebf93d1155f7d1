"""The test Kafka broker itself (tests/brokers/kafka.py), exercised with raw aiokafka.

These pin what the Kafka backend's tests rely on: topics are created explicitly and carry
data, the broker's limits are the ones the endpoint advertises, SASL/PLAIN accepts the
advertised users and rejects a wrong password promptly, and a restart after a crash keeps
every acknowledged message (after a clean stop, ``test_kafka_backend``'s restart test
shows it, on both engines).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed

pytestmark = pytest.mark.kafka


def _topic(label: str) -> str:
    return f"launcher-{label}-{uuid.uuid4().hex[:8]}"


async def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()


async def _read_all(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) of the first ``count`` records of ``topic``, read from the start."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        records: list[tuple[int, bytes | None]] = []
        async with asyncio.timeout(20):
            while len(records) < count:
                record = await consumer.getone()
                records.append((record.offset, record.value))
        return records
    finally:
        await consumer.stop()


@pytest.fixture
async def producer(kafka_broker: Any) -> AsyncIterator[AIOKafkaProducer]:
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    await producer.start()
    yield producer
    await producer.stop()


async def test_created_topic_round_trips_a_message(
    kafka_broker: Any, producer: AIOKafkaProducer
) -> None:
    topic = _topic("roundtrip")
    await _create_topic(kafka_broker.bootstrap, topic)

    sent = await producer.send_and_wait(topic, b"hello", key=b"k1")

    assert (sent.topic, sent.partition, sent.offset) == (topic, 0, 0)
    assert await _read_all(kafka_broker.bootstrap, topic, 1) == [(0, b"hello")]


async def test_broker_settings_match_the_endpoint(kafka_broker: Any) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])
    finally:
        await admin.close()
    [(_error, _message, _type, _name, entries)] = response.resources
    configs = {entry[0]: entry[1] for entry in entries}

    assert int(configs["message.max.bytes"]) == kafka_broker.message_max_bytes
    assert configs["auto.create.topics.enable"] == "false"


async def test_sasl_plain_with_the_right_password_produces(kafka_broker: Any) -> None:
    if kafka_broker.sasl_bootstrap is None:
        pytest.skip("this Kafka endpoint has no SASL listener")
    user, password = next(iter(kafka_broker.sasl_users.items()))
    topic = _topic("sasl")
    await _create_topic(kafka_broker.bootstrap, topic)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_broker.sasl_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=user,
        sasl_plain_password=password,
    )
    await producer.start()
    try:
        sent = await producer.send_and_wait(topic, b"authenticated")
    finally:
        await producer.stop()

    assert sent.offset == 0
    assert await _read_all(kafka_broker.bootstrap, topic, 1) == [(0, b"authenticated")]


async def test_sasl_plain_with_a_wrong_password_is_rejected_promptly(kafka_broker: Any) -> None:
    if kafka_broker.sasl_bootstrap is None:
        pytest.skip("this Kafka endpoint has no SASL listener")
    user = next(iter(kafka_broker.sasl_users))
    host, _, port = kafka_broker.sasl_bootstrap.rpartition(":")
    started = time.monotonic()

    # The broker answers the handshake with an authentication error...
    with pytest.raises(SaslAuthenticationFailed, match="Invalid username or password"):
        async with asyncio.timeout(10):
            await create_conn(
                host,
                int(port),
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="PLAIN",
                sasl_plain_username=user,
                sasl_plain_password="not-the-password",
            )
    # ...which aiokafka's clients report only as a failed bootstrap (the cause is logged).
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_broker.sasl_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=user,
        sasl_plain_password="not-the-password",
    )
    try:
        with pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
            async with asyncio.timeout(10):
                await producer.start()
    finally:
        await producer.stop()

    assert time.monotonic() - started < 10


async def test_a_restart_after_a_crash_keeps_every_acknowledged_message(kafka_broker: Any) -> None:
    if not kafka_broker.restartable:
        pytest.skip("this Kafka endpoint cannot be restarted by the tests")
    topic = _topic("restart-kill")
    await _create_topic(kafka_broker.bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    await producer.start()
    try:
        offsets = [(await producer.send_and_wait(topic, f"m{i}".encode())).offset for i in range(3)]
    finally:
        await producer.stop()
    assert offsets == [0, 1, 2]

    kafka_broker.kill()
    kafka_broker.start()

    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    await producer.start()
    try:
        after = await producer.send_and_wait(topic, b"m3")
    finally:
        await producer.stop()
    assert after.offset == 3
    assert await _read_all(kafka_broker.bootstrap, topic, 4) == [
        (0, b"m0"),
        (1, b"m1"),
        (2, b"m2"),
        (3, b"m3"),
    ]
