"""Two more ways to drive confluent-kafka from asyncio, measured beside the confluent engine
by ``bench_kafka.py``: what issue 16's goals ask of *any* asyncio code on this machine.

- :class:`AsyncioFloor` ("raw confluent-kafka, asyncio floor"): the least an asyncio
  program can do per send. The same encoded bytes as the raw baseline, one future per
  send resolved straight from its last delivery report, and the loop woken by
  librdkafka's queue signal (the engine's own wake-up, :mod:`.rdkafka_io`, the fastest
  one found) then ``poll(0)``. No encoding, routing, deadline, windows or error mapping:
  everything msgstream adds is absent, so msgstream cannot be faster than this.
- :class:`EncodingFloor` ("asyncio floor + encoding"): the asyncio floor handed the
  messages instead of their bytes, which it encodes inside the measured time with
  msgstream's own encoders (``encode_one`` for one message, ``encode_batch`` for a
  pack), as the engine must: what is left of the floor's margin once messages are
  encoded, and what the engine adds beyond encoding.
- :class:`AiokafkaBeside` ("raw aiokafka, same slices"): the aiokafka engine's raw
  baseline, measured here too, so that the figures against raw aiokafka (the engine's
  ">= 3x raw aiokafka") compare sides that alternate in one run. Taken from the aiokafka
  engine's own slices, half a minute earlier, raw aiokafka swung 1.5x between runs on
  this shared machine while the confluent sides did not.
- :class:`LeastEncodingFloor` ("asyncio floor + the least checked encoding"): the same
  with the least a checked encoder of these messages does (``floor_encoder.py``) in
  place of msgstream's: what is left of the floor's margin whatever the encoder.
- :class:`AioProducer` ("confluent_kafka.aio"): confluent-kafka's own asyncio producer
  (``AIOProducer``, default settings): each record ``produce``d, then ``flush()`` (which
  hands its buffer to librdkafka and waits for the reports in its thread pool), then
  each record's future awaited. Without ``flush()`` a lone record waits for the
  buffer's one-second timeout: its futures are resolved only when something polls.

Each sends what the raw baseline sends (``prepare`` encodes, untimed), to topics of their
own created the way msgstream creates them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from floor_encoder import least_checked_encode, least_checked_encode_one
from msgstream.backends.kafka.bench_baseline import RawAiokafka, create_topics
from msgstream.backends.kafka.engines.rdkafka_io import QueueEvents, attach
from msgstream.backends.kafka.settings import KafkaConfig, librdkafka_producer
from msgstream.bench.targets import Target, package_version
from msgstream.configuration.config import Config
from msgstream.wire.batch_encoder import encode_batch, encode_one
from msgstream.wire.codec import encode
from msgstream.wire.messages import TsMsg


class _Raw(Target):
    """Topics of its own (``suffix``), the raw baseline's librdkafka properties and bytes."""

    suffix = ""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.conf = librdkafka_producer(config.section(KafkaConfig))
        self.channels: list[str] = []
        self.producer: Any = None  # the subclass's producer, made in its open

    async def open(self, channels: Sequence[str]) -> None:
        self.channels = [f"{channel}-{self.suffix}" for channel in channels]
        await create_topics(self.config, self.channels)

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        return [encode(msg) for msg in msgs]

    def client(self) -> dict[str, Any]:
        return {"library": f"confluent-kafka {package_version('confluent-kafka')}"}


class AsyncioFloor(_Raw):
    label = "raw confluent-kafka, asyncio floor"
    suffix = "floor"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.events: QueueEvents | None = None

    async def open(self, channels: Sequence[str]) -> None:
        from confluent_kafka import Producer

        await super().open(channels)
        self.producer = Producer(self.conf)
        events = attach(self.producer, str(self.conf.get("client.id", "rdkafka")))
        if isinstance(events, str):
            raise RuntimeError(f"the asyncio floor needs librdkafka's queue signal: {events}")
        self.events = events
        asyncio.get_running_loop().add_reader(events.fileno(), self._serve)

    def _serve(self) -> None:
        assert self.events is not None
        self.events.drained()
        self.producer.poll(0)

    async def send(self, channel: int, prepared: Any) -> None:
        future = asyncio.get_running_loop().create_future()
        remaining = len(prepared)
        failed: list[Any] = []

        def delivered(error: Any, _msg: Any) -> None:
            nonlocal remaining
            if error is not None:
                failed.append(error)
            remaining -= 1
            if not remaining:
                future.set_result(None)

        topic = self.channels[channel]
        if remaining == 1:
            self.producer.produce(topic, prepared[0], partition=0, on_delivery=delivered)
        else:
            messages = [{"value": payload} for payload in prepared]
            queued = self.producer.produce_batch(
                topic, messages, partition=0, on_delivery=delivered
            )
            if queued != len(prepared):
                raise RuntimeError(f"{topic}: librdkafka queued {queued} of {len(prepared)}")
        await future
        if failed:
            raise RuntimeError(f"{topic}: {failed[0]}")

    async def close(self) -> None:
        if self.events is not None:
            events, self.events = self.events, None
            asyncio.get_running_loop().remove_reader(events.fileno())
            events.close()
        producer, self.producer = self.producer, None
        if producer is not None:
            await asyncio.to_thread(producer.flush, self.config.msgstream.operation_timeout_s)


class EncodingFloor(AsyncioFloor):
    label = "asyncio floor + encoding"
    suffix = "floorenc"
    encoders: tuple[Callable[[TsMsg], bytes], Callable[[Sequence[TsMsg]], list[bytes]]] = (
        encode_one,
        encode_batch,
    )
    """What encodes one message, and what a pack."""

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        return msgs

    async def send(self, channel: int, prepared: Any) -> None:
        one, pack = self.encoders
        await super().send(channel, [one(prepared[0])] if len(prepared) == 1 else pack(prepared))


class LeastEncodingFloor(EncodingFloor):
    label = "asyncio floor + the least checked encoding"
    suffix = "floorleast"
    encoders = (least_checked_encode_one, least_checked_encode)


class AioProducer(_Raw):
    label = "confluent_kafka.aio AIOProducer"
    suffix = "aio"

    async def open(self, channels: Sequence[str]) -> None:
        from confluent_kafka.aio import AIOProducer as Producer

        await super().open(channels)
        self.producer = Producer(self.conf)

    async def send(self, channel: int, prepared: Any) -> None:
        producer = self.producer
        topic = self.channels[channel]
        futures = [await producer.produce(topic, payload, partition=0) for payload in prepared]
        await producer.flush()
        await asyncio.gather(*futures)

    async def close(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            await producer.close()


class AiokafkaBeside(RawAiokafka):
    label = "raw aiokafka, same slices"

    async def open(self, channels: Sequence[str]) -> None:
        await super().open([f"{channel}-beside" for channel in channels])
