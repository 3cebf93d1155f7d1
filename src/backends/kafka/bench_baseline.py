"""The Kafka backend's part in ``msgstream bench``: its raw baseline, the client library
of the configured engine (``kafka.client``).

aiokafka: one ``AIOKafkaProducer`` with the producer settings msgstream's client uses
(``producer_kwargs``: acks, linger, security, ``kafka.producer``), sending the same
encoded bytes to topics of its own (created the way msgstream creates them, one
partition): ``send_and_wait`` per message, a pack's messages sent together and awaited
together.

confluent: one confluent-kafka ``Producer`` with the engine's librdkafka properties
(``librdkafka_producer``), used the way a program without asyncio uses it at its fastest:
``produce`` each message, then ``flush()`` -- which blocks the calling thread (here the
loop's, nothing else runs) until every delivery report is in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer

from msgstream.bench.targets import BenchPlugin, Target, package_version, redacted
from msgstream.configuration.config import Config
from msgstream.streams.factory import new_client
from msgstream.wire.codec import encode
from msgstream.wire.messages import TsMsg

from .settings import KafkaConfig, librdkafka_producer, producer_kwargs


async def create_topics(config: Config, channels: Sequence[str]) -> None:
    """One-partition topics, as msgstream makes them (also used by the benchmarks' own
    confluent-kafka targets)."""
    client = new_client(config)
    try:
        for channel in channels:
            await client.create_producer(channel)
    finally:
        await client.close()


class RawAiokafka(Target):
    label = "raw aiokafka"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.section = config.section(KafkaConfig)
        self.producer: AIOKafkaProducer | None = None
        self.channels: list[str] = []

    async def open(self, channels: Sequence[str]) -> None:
        self.channels = [f"{channel}-raw" for channel in channels]
        await create_topics(self.config, self.channels)
        self.producer = AIOKafkaProducer(**producer_kwargs(self.section))
        await self.producer.start()

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        return [encode(msg) for msg in msgs]

    async def send(self, channel: int, prepared: Any) -> None:
        assert self.producer is not None
        topic = self.channels[channel]
        if len(prepared) == 1:
            await self.producer.send_and_wait(topic, prepared[0], partition=0)
            return
        futures = [await self.producer.send(topic, p, partition=0) for p in prepared]
        await asyncio.gather(*futures)

    async def close(self) -> None:
        if self.producer is not None:
            producer, self.producer = self.producer, None
            await producer.stop()

    def client(self) -> dict[str, Any]:
        settings = {k: v for k, v in producer_kwargs(self.section).items() if k != "ssl_context"}
        return {
            "library": f"aiokafka {package_version('aiokafka')}",
            "settings": redacted(settings, self.section),
        }


class RawConfluent(Target):
    label = "raw confluent-kafka"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.section = config.section(KafkaConfig)
        self.producer: Any = None
        self.channels: list[str] = []

    async def open(self, channels: Sequence[str]) -> None:
        from confluent_kafka import Producer

        self.channels = [f"{channel}-rawc" for channel in channels]
        await create_topics(self.config, self.channels)
        self.producer = Producer(librdkafka_producer(self.section))

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        return [encode(msg) for msg in msgs]

    async def send(self, channel: int, prepared: Any) -> None:
        producer = self.producer
        topic = self.channels[channel]
        produce = producer.produce
        for payload in prepared:
            produce(topic, payload, partition=0)
        if producer.flush(self.config.msgstream.operation_timeout_s):
            raise TimeoutError(f"{topic}: not every message was acknowledged")

    async def close(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            producer.flush(self.config.msgstream.operation_timeout_s)

    def client(self) -> dict[str, Any]:
        return {
            "library": f"confluent-kafka {package_version('confluent-kafka')}",
            "settings": redacted(librdkafka_producer(self.section), self.section),
        }


def raw_target(config: Config) -> Target:
    """The raw client of the configured engine."""
    if config.section(KafkaConfig).client == "confluent":
        return RawConfluent(config)
    return RawAiokafka(config)


async def broker_info(config: Config) -> dict[str, Any]:
    """The bootstrap address and the newest produce API version the broker offers."""
    section = config.section(KafkaConfig)
    info: dict[str, Any] = {"broker": "Apache Kafka", "address": section.brokers}
    producer = AIOKafkaProducer(**producer_kwargs(section))
    try:
        await asyncio.wait_for(producer.start(), config.msgstream.operation_timeout_s)
        version = getattr(producer.client, "api_version", None)
        if version is not None:
            info["api_version"] = ".".join(map(str, version))
    finally:
        await producer.stop()
    return info


BENCH = BenchPlugin(raw_target=raw_target, broker_info=broker_info)
