"""The Kafka backend's part in ``msgstream bench``: its raw baseline, aiokafka.

One ``AIOKafkaProducer`` with the producer settings msgstream's client uses
(``producer_kwargs``: acks, linger, security, ``kafka.producer``), sending the same
encoded bytes to topics of its own (created the way msgstream creates them, one
partition): ``send_and_wait`` per message, a pack's messages sent together and awaited
together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer

from msgstream.bench.targets import BenchPlugin, Target, package_version, redacted
from msgstream.codec import encode
from msgstream.config import Config
from msgstream.factory import new_client
from msgstream.messages import TsMsg

from .settings import KafkaConfig, producer_kwargs


class RawAiokafka(Target):
    label = "raw aiokafka"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.section = config.section(KafkaConfig)
        self.producer: AIOKafkaProducer | None = None
        self.channels: list[str] = []

    async def open(self, channels: Sequence[str]) -> None:
        self.channels = [f"{channel}-raw" for channel in channels]
        client = new_client(self.config)
        try:
            for channel in self.channels:  # one-partition topics, as msgstream makes them
                await client.create_producer(channel)
        finally:
            await client.close()
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
            "settings": redacted(settings),
        }


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


BENCH = BenchPlugin(raw_target=RawAiokafka, broker_info=broker_info)
