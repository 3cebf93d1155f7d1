"""Observability: metric values after a known workload, the stalled-channel watch, trace
context from producer to consumer, structured log fields, and metrics off costing nothing."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from harness import BackendHarness
from helpers.docs_pages import generated_section
from helpers.loop_time import on_loop_time
from msgstream import (
    DeleteMsg,
    InsertMsg,
    MsgPack,
    SubscriptionPosition,
    TimeTickMsg,
    TsMsg,
    encode,
)
from msgstream.configuration.config import Config, config_from_dict
from msgstream.observability.metrics import METRICS, PrometheusInstruments
from msgstream.observability.observe import Instruments, combine, default_instruments
from msgstream.streams.factory import new_client, new_msgstream, new_ttmsgstream
from msgstream.streams.routing import repack_by_first_key
from msgstream.timetick.stall import StallWatch
from msgstream.wire.tso import compose_ts

TIMEOUT = 60.0
"""How long what must happen may take (a deadline, never a pause): a loaded machine is slow."""


def memory_config(tmp_path: Path, **msgstream: Any) -> Config:
    return config_from_dict(
        {"mq": {"type": "memory"}, "memory": {"name": str(tmp_path)}, "msgstream": msgstream},
        env={},
    )


def insert(msg_id: int, key: int) -> InsertMsg:
    return InsertMsg(
        msg_id=msg_id,
        timestamp=compose_ts(1 + msg_id, 0),
        collection_name="c",
        row_ids=[msg_id],
        hash_keys=[key],
    )


def delete(msg_id: int, ts: int, key: int = 0) -> DeleteMsg:
    return DeleteMsg(
        msg_id=msg_id, timestamp=ts, collection_name="c", primary_keys=[msg_id], hash_keys=[key]
    )


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when none)."""
    return sum(
        sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


def by_type(registry: CollectorRegistry, name: str, **labels: str) -> dict[str, float]:
    """``name``'s samples whose labels include ``labels``, by their ``msg_type``."""
    return {
        sample.labels["msg_type"]: sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    }


async def until(condition: Callable[[], bool], timeout_s: float = TIMEOUT) -> None:
    """Return once ``condition()`` holds, looking every 50 ms (what it watches, a metric
    that a background task updates, has no event to wait on); fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"the condition did not hold within {timeout_s} s")
        await asyncio.sleep(0.05)


# --------------------------------------------------------------------------- metrics


async def test_message_counters_tell_ticks_from_data(tmp_path: Path) -> None:
    """10 inserts and 2 time ticks read 10 for Insert, not 12, on both sides: sent as one
    pack (routed over two channels), one by one, and as broadcasts."""
    registry = CollectorRegistry()
    instruments = PrometheusInstruments(registry)
    config = memory_config(tmp_path)
    async with new_msgstream(config, instruments=instruments) as producer:
        await producer.as_producer(["a", "b"])
        await producer.produce(MsgPack(msgs=[insert(i, key=i % 2) for i in range(6)]))
        for i in range(6, 10):
            await producer.produce(MsgPack.of(insert(i, key=0)))
        for tick in (100, 200):
            await producer.broadcast(MsgPack.of(TimeTickMsg(timestamp=compose_ts(tick, 0))))
    async with new_msgstream(config, instruments=instruments) as consumer:
        await consumer.as_consumer(["a", "b"], "sub", SubscriptionPosition.EARLIEST)
        async with asyncio.timeout(TIMEOUT):
            seen = [msg for _ in range(14) for msg in (await anext(consumer)).msgs]
    assert len(seen) == 14
    produced = "msgstream_produced_messages_total"
    assert by_type(registry, produced, channel="a") == {"Insert": 7, "TimeTick": 2}
    assert by_type(registry, produced, channel="b") == {"Insert": 3, "TimeTick": 2}
    assert value(registry, produced, msg_type="Insert") == 10
    consumed = "msgstream_consumed_messages_total"
    assert by_type(registry, consumed, channel="a", subscription="sub") == {
        "Insert": 7,
        "TimeTick": 2,
    }
    assert value(registry, consumed, msg_type="Insert") == 10
    assert value(registry, consumed, msg_type="TimeTick") == 4


async def test_a_produce_to_one_channel_is_timed_and_counted_once(tmp_path: Path) -> None:
    """One message, then a pack of three, on a stream of one channel: each call is one
    send and one produce, timed once, its messages and payload bytes counted."""
    registry = CollectorRegistry()
    config = memory_config(tmp_path)
    packs = [[insert(0, key=0)], [insert(i, key=0) for i in (1, 2, 3)]]
    async with new_msgstream(config, instruments=PrometheusInstruments(registry)) as stream:
        await stream.as_producer(["a"])
        results = [await stream.produce(MsgPack(msgs=msgs)) for msgs in packs]
    assert [len(result["a"]) for result in results] == [1, 3]
    sent_bytes = sum(len(encode(msg)) for msgs in packs for msg in msgs)
    labels = {"backend": "memory", "channel": "a"}
    assert by_type(registry, "msgstream_produced_messages_total", **labels) == {"Insert": 4}
    assert value(registry, "msgstream_produced_bytes_total", **labels) == sent_bytes
    assert value(registry, "msgstream_send_duration_seconds_count", **labels) == 2
    assert value(registry, "msgstream_produce_duration_seconds_count", backend="memory") == 2
    assert value(registry, "msgstream_produce_errors_total") == 0


async def test_counters_after_a_known_workload(tmp_path: Path) -> None:
    """1,000 produced, 10 bad payloads injected, 3 late messages: the counters say so."""
    registry = CollectorRegistry()
    instruments = PrometheusInstruments(registry)
    config = memory_config(tmp_path)
    async with new_ttmsgstream(config, instruments=instruments) as producer:
        await producer.as_producer(["a", "b"])
        ts = 0
        for round_ in range(10):  # 10 packs of 100 messages: 50 per channel and a tick each
            msgs: list[TsMsg] = []
            for i in range(100):
                ts += 1
                msgs.append(delete(round_ * 100 + i, compose_ts(ts, 0), key=i % 2))
            await producer.produce(MsgPack(msgs=msgs))
            ts += 1
            await producer.broadcast(MsgPack.of(TimeTickMsg(timestamp=compose_ts(ts, 0))))
        raw = await new_client(config).create_producer("a")
        for i in range(10):
            await raw.send(b"not a message %d" % i)
        for i in range(3):  # at or below a's last tick: late
            await producer.produce(MsgPack.of(delete(5000 + i, compose_ts(ts - 1, i), key=0)))
        ts += 1
        await producer.broadcast(MsgPack.of(TimeTickMsg(timestamp=compose_ts(ts, 0))))

    m = {"backend": "memory"}
    assert value(registry, "msgstream_produced_messages_total", channel="a", **m) == 500 + 3 + 11
    assert value(registry, "msgstream_produced_messages_total", channel="b", **m) == 500 + 11
    produced = by_type(registry, "msgstream_produced_messages_total", channel="a", **m)
    assert produced == {"Delete": 503, "TimeTick": 11}
    assert value(registry, "msgstream_send_duration_seconds_count", channel="b", **m) == 21
    assert value(registry, "msgstream_produce_duration_seconds_count", **m) == 10 + 11 + 3

    consumer = new_ttmsgstream(config, instruments=instruments)
    async with consumer:
        await consumer.as_consumer(["a", "b"], "sub", SubscriptionPosition.EARLIEST)
        delivered = 0
        async with asyncio.timeout(TIMEOUT):
            async for pack in consumer:
                delivered += len(pack.msgs)
                await consumer.ack(pack)
                if pack.end_ts == compose_ts(ts, 0):
                    break
    assert delivered == 1003
    s = {"backend": "memory", "subscription": "sub"}
    assert value(registry, "msgstream_consumed_messages_total", channel="a", **s) == 524
    assert value(registry, "msgstream_consumed_messages_total", channel="b", **s) == 511
    consumed = by_type(registry, "msgstream_consumed_messages_total", channel="a", **s)
    assert consumed == {"Delete": 503, "TimeTick": 11, "undecodable": 10}
    assert value(registry, "msgstream_bad_payloads_total", channel="a", **s) == 10
    assert value(registry, "msgstream_bad_payloads_total", channel="b", **s) == 0
    assert value(registry, "msgstream_bad_payloads_total", error="DecodeError") == 10
    assert value(registry, "msgstream_late_messages_total", channel="a", policy="deliver", **s) == 3
    # 11 packs cut; timestamps from 1970 put the stream in pursuit mode, which merges them.
    packs = value(registry, "msgstream_packs_total", **s)
    assert packs + value(registry, "msgstream_pursuit_merges_total", **s) == 11
    assert value(registry, "msgstream_pack_messages_count", **s) == packs
    assert value(registry, "msgstream_pack_messages_sum", **s) == 1003
    assert value(registry, "msgstream_acks_total", channel="a", **s) == packs
    assert value(registry, "msgstream_time_tick_lag_seconds", **s) > 0


async def test_produce_errors_are_counted_by_type(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    config = memory_config(tmp_path, max_message_bytes=100)
    async with new_msgstream(config, instruments=PrometheusInstruments(registry)) as stream:
        await stream.as_producer(["a"])
        for _ in range(2):
            with pytest.raises(Exception, match="exceeds the limit"):
                await stream.produce(MsgPack.of(big()))
    assert (
        value(
            registry,
            "msgstream_produce_errors_total",
            backend="memory",
            error="MessageTooLargeError",
        )
        == 2
    )
    assert value(registry, "msgstream_produced_messages_total", backend="memory", channel="a") == 0


def big() -> DeleteMsg:
    return DeleteMsg(
        msg_id=1, timestamp=1, collection_name="x" * 200, primary_keys=[1], hash_keys=[0]
    )


async def test_metrics_off_makes_no_probe(tmp_path: Path) -> None:
    assert default_instruments() is None
    async with new_msgstream(memory_config(tmp_path)) as stream:
        await stream.as_producer(["a"])
        await stream.as_consumer(["a"], "s")
        assert stream._instruments is None
        assert stream._send_probes == []
        assert all(r.probe is None for r in stream._readers)


def test_metric_names_follow_prometheus_conventions() -> None:
    for metric in METRICS:
        assert metric.name.startswith("msgstream_")
        assert metric.name.endswith("_total") == (metric.kind == "counter"), metric.name
    registry = CollectorRegistry()
    PrometheusInstruments(registry)
    exposed = {m.name for m in registry.collect()}
    assert {m.name.removesuffix("_total") for m in METRICS} == exposed


def test_enable_uses_one_set_of_metrics_per_registry() -> None:
    import msgstream.observability.metrics

    registry = CollectorRegistry()
    try:
        first = msgstream.observability.metrics.enable(registry)
        assert msgstream.observability.metrics.enable(registry) is first
        assert default_instruments() is first
        assert msgstream.observability.metrics.enabled()
    finally:
        msgstream.observability.metrics.disable()
    assert default_instruments() is None


def test_combine() -> None:
    a, b = Instruments(), Instruments()
    assert combine(None, None) is None
    assert combine(a, None) is a
    both = combine(a, b)
    assert both is not None and both is not a
    record = both.producer("memory", "a").start()
    record.done(1, 1)
    assert record.properties is None


# --------------------------------------------------------------------------- stalled channels


def test_the_stall_watch_reports_once_and_on_recovery(caplog: pytest.LogCaptureFixture) -> None:
    t = compose_ts
    watch = StallWatch(["a", "b"], threshold_s=1.0, now=0.0, backend="memory", subscription="s")
    with caplog.at_level(logging.WARNING, logger="msgstream.stall"):
        watch.observe([t(1000, 0), t(1000, 0)], 0.1)
        for step in range(2, 40):  # b ticks every 100 ms, a stops at 1 s
            watch.observe([t(1000, 0), t(1000 + step * 100, 0)], step / 10)
        assert watch.stalled == ["a"]
        states = {s.channel: s for s in watch.states()}
        assert states["a"].stalled and not states["b"].stalled
        assert states["a"].behind_s == pytest.approx(3.9)
        watch.observe([t(5000, 0), t(5000, 0)], 4.0)
        assert watch.stalled == []
    records = [r for r in caplog.records if r.name == "msgstream.stall"]
    assert len(records) == 2
    assert "channel 'a' holds the time tick back" in records[0].getMessage()
    assert (
        "3.7s behind" in records[0].getMessage() or "behind the newest" in records[0].getMessage()
    )
    assert records[0].channel == "a"  # type: ignore[attr-defined]
    assert records[0].subscription == "s"  # type: ignore[attr-defined]
    assert records[0].backend == "memory"  # type: ignore[attr-defined]
    assert "advances again" in records[1].getMessage()


def test_a_quiet_stream_is_no_stall() -> None:
    watch = StallWatch(["a", "b"], threshold_s=1.0, now=0.0)
    watch.observe([compose_ts(1, 0), compose_ts(2, 0)], 0.1)
    watch.observe([compose_ts(1, 0), compose_ts(2, 0)], 50.0)
    assert watch.stalled == []  # nothing advanced since: no channel is left behind


@on_loop_time
async def test_a_channel_that_stops_ticking_is_reported_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On a loop with a clock of its own (``helpers.loop_time``): ticks every 20 ms and
    the watch's looks every 25 ms come exactly as planned, so a busy machine cannot make a
    channel that ticks look stalled for a moment."""
    registry = CollectorRegistry()
    config = memory_config(tmp_path, tick_interval_s=0.02, stall_after_ticks=5)  # 0.1 s
    producer = new_msgstream(config, repack=repack_by_first_key)
    consumer = new_ttmsgstream(config, instruments=PrometheusInstruments(registry))
    labels = {"backend": "memory", "subscription": "s", "channel": "b"}
    async with producer, consumer:
        await producer.as_producer(["a", "b"])
        await consumer.as_consumer(["a", "b"], "s", missing="create")
        ts = 1000

        async def tick(channels: list[int], rounds: int) -> None:
            nonlocal ts
            for _ in range(rounds):
                ts += 20
                await producer.produce(
                    MsgPack(
                        msgs=[
                            TimeTickMsg(timestamp=compose_ts(ts, 0), hash_keys=[c])
                            for c in channels
                        ]
                    )
                )
                await asyncio.sleep(0.02)

        async def drain() -> None:
            async for _ in consumer:
                pass

        with caplog.at_level(logging.WARNING, logger="msgstream.stall"):
            draining = asyncio.create_task(drain())
            await tick([0, 1], 5)
            assert consumer.stalled_channels == []
            await tick([0], 25)  # b stops ticking for 0.5 s: five thresholds
            assert consumer.stalled_channels == ["b"]
            state = {s.channel: s for s in consumer.channel_states()}["b"]
            assert state.stalled and state.behind_s is not None and state.behind_s > 0.2
            assert value(registry, "msgstream_channel_stalled", **labels) == 1
            assert value(registry, "msgstream_channel_behind_seconds", **labels) > 0
            await tick([0, 1], 10)
            assert consumer.stalled_channels == []
            assert value(registry, "msgstream_channel_stalled", **labels) == 0
            draining.cancel()
    records = [r for r in caplog.records if r.name == "msgstream.stall"]
    assert [r.getMessage().split(":")[0] for r in records] == [
        "channel 'b' holds the time tick back",
        "channel 'b' advances again",
    ]
    assert value(registry, "msgstream_channel_stalls_total", **labels) == 1


# --------------------------------------------------------------------------- logs


def test_every_msgstream_record_carries_the_context_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from msgstream.observability.logs import get_logger

    with caplog.at_level(logging.INFO, logger="msgstream"):
        get_logger("msgstream.test").info("plain")
    (record,) = caplog.records
    assert (record.backend, record.channel, record.subscription) == (None, None, None)  # type: ignore[attr-defined]


async def test_a_bad_payload_is_logged_with_its_context(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = memory_config(tmp_path)
    async with new_msgstream(config) as stream:
        await stream.as_producer(["a"])
        raw = await new_client(config).create_producer("a")
        await raw.send(b"garbage")
        await stream.produce(MsgPack.of(delete(1, 1)))
        await stream.as_consumer(["a"], "s")
        with caplog.at_level(logging.WARNING, logger="msgstream"):
            async with asyncio.timeout(TIMEOUT):
                await anext(aiter(stream))
    (record,) = [r for r in caplog.records if "undecodable" in r.getMessage()]
    assert (record.backend, record.channel, record.subscription) == ("memory", "a", "s")  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- traces


async def test_the_producer_span_is_the_consumer_span_parent(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from msgstream.observability.tracing import TracingInstruments

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instruments = TracingInstruments(provider)
    config = memory_config(tmp_path)
    async with new_msgstream(config, instruments=instruments) as stream:
        await stream.as_producer(["a"])
        await stream.produce(MsgPack.of(delete(1, 1)))
        raw = await new_client(config).create_producer("a")
        await raw.send(  # a malformed trace context is ignored
            __import__("msgstream").encode(delete(2, 2)), {"traceparent": "00-zz-not-valid"}
        )
        await stream.as_consumer(["a"], "s")
        async with asyncio.timeout(TIMEOUT):
            iterator = aiter(stream)
            first = await anext(iterator)
            second = await anext(iterator)
    assert [m.msg_id for m in (*first.msgs, *second.msgs)] == [1, 2]
    spans = exporter.get_finished_spans()
    produced = [s for s in spans if s.kind == SpanKind.PRODUCER]
    consumed = [s for s in spans if s.kind == SpanKind.CONSUMER]
    assert len(produced) == 1 and len(consumed) == 2
    assert consumed[0].parent is not None
    assert consumed[0].parent.span_id == produced[0].context.span_id
    assert consumed[0].context.trace_id == produced[0].context.trace_id
    assert consumed[1].parent is None  # its traceparent was garbage: a trace of its own


async def test_spans_name_their_channels(tmp_path: Path) -> None:
    """One channel: ``messaging.destination.name`` (OpenTelemetry's messaging conventions);
    a call or pack over several: no destination (as the conventions say for a batch) and
    ``msgstream.channels`` listing them."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from msgstream.observability.tracing import CHANNELS_ATTRIBUTE, TracingInstruments

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instruments = TracingInstruments(provider)
    config = memory_config(tmp_path)

    def named(kind: SpanKind) -> list[tuple[object, object]]:
        spans = [s for s in exporter.get_finished_spans() if s.kind == kind]
        exporter.clear()
        return [
            (
                (s.attributes or {}).get("messaging.destination.name"),
                (s.attributes or {}).get(CHANNELS_ATTRIBUTE),
            )
            for s in spans
        ]

    async with new_ttmsgstream(config, instruments=instruments) as producer:
        await producer.as_producer(["a", "b"])
        await producer.produce(MsgPack.of(delete(1, compose_ts(1, 0), key=1)))  # b only
        await producer.produce(  # both
            MsgPack(msgs=[delete(2, compose_ts(2, 0), key=0), delete(3, compose_ts(3, 0), key=1)])
        )
        await producer.broadcast(MsgPack.of(TimeTickMsg(timestamp=compose_ts(4, 0))))
    assert named(SpanKind.PRODUCER) == [("b", None), (None, ("a", "b")), (None, ("a", "b"))]

    async with new_msgstream(config, instruments=instruments) as plain:
        await plain.as_consumer(["a"], "plain", SubscriptionPosition.EARLIEST)
        async with asyncio.timeout(TIMEOUT):
            assert len((await anext(plain)).msgs) == 1
    assert named(SpanKind.CONSUMER) == [("a", None)]

    async with new_ttmsgstream(config, instruments=instruments) as aligned:
        await aligned.as_consumer(["a", "b"], "tt", SubscriptionPosition.EARLIEST)
        async with asyncio.timeout(TIMEOUT):
            pack = await anext(aligned)
    assert sorted(m.msg_id for m in pack.msgs) == [1, 2, 3]
    ((destination, channels),) = named(SpanKind.CONSUMER)
    assert destination is None
    assert sorted(channels) == ["a", "b"]  # type: ignore[call-overload]


# --------------------------------------------------------------------------- cost


async def test_metrics_do_not_slow_a_stream_down_much(tmp_path: Path) -> None:
    """A coarse guard (the figures are in ``make bench``): produce with metrics on costs
    at most a few times what it costs off. Cost is the CPU time of the loop's thread (a
    memory send completes inline), not wall time, which a busy machine stretches at will;
    the runs alternate, so a change in the machine's speed hits both sides."""
    config = memory_config(tmp_path)

    async def run(instruments: Instruments | None) -> float:
        async with new_msgstream(config, instruments=instruments) as stream:
            await stream.as_producer(["a"])
            pack = MsgPack.of(delete(1, 1))
            start = time.thread_time()
            for _ in range(2000):
                await stream.produce(pack)
            return time.thread_time() - start

    off: list[float] = []
    on: list[float] = []
    for _ in range(3):
        off.append(await run(None))
        on.append(await run(PrometheusInstruments(CollectorRegistry())))
    assert min(on) < min(off) * 5


# --------------------------------------------------------------------------- inspect


async def test_inspect_shows_time_lag_and_a_channel_behind(tmp_path: Path) -> None:
    from msgstream.cli import inspection

    config = memory_config(tmp_path)
    now_ms = int(time.time() * 1000)
    async with new_msgstream(config, repack=repack_by_first_key) as producer:
        await producer.as_producer(["fast", "slow"])
        for i in range(10):  # fast: a message a second for 10 s; slow: stops after 2
            stamp = compose_ts(now_ms - 10_000 + i * 1000, 0)
            await producer.produce(MsgPack.of(delete(i, stamp, key=0)))
            if i < 2:
                await producer.produce(MsgPack.of(delete(100 + i, stamp, key=1)))
        async with new_msgstream(config) as consumer:
            await consumer.as_consumer(["fast", "slow"], "sub")
            async with asyncio.timeout(TIMEOUT):
                seen = 0
                async for pack in consumer:
                    if pack.msgs[0].msg_id in (3, 101):  # ack fast up to its 4th, slow all
                        await consumer.ack(pack)
                    seen += 1
                    if seen == 12:
                        break
    client = new_client(config)
    try:
        views = {v.channel: v for v in await inspection.collect(client, None, 5.0)}
    finally:
        await client.close()
    fast, slow = views["fast"], views["slow"]
    assert (fast.behind_s, fast.stalled) == (0.0, False)
    assert slow.behind_s == pytest.approx(8.0) and slow.stalled
    assert fast.subscriptions is not None and slow.subscriptions is not None
    (fast_sub,) = fast.subscriptions
    (slow_sub,) = slow.subscriptions
    assert (fast_sub.lag, fast_sub.time_lag_s) == (6, pytest.approx(6.0))
    assert (slow_sub.lag, slow_sub.time_lag_s) == (0, 0.0)
    document = inspection.to_json("memory", list(views.values()))
    assert document["channels"][1]["stalled"] is True
    assert document["channels"][0]["subscriptions"][0]["time_lag_s"] == pytest.approx(6.0)


# --------------------------------------------------------------------------- rocksmq


async def test_rocksmq_reports_retention_size_and_backlog(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    config = config_from_dict(
        {
            "mq": {"type": "rocksmq"},
            "rocksmq": {
                "path": str(tmp_path / "store"),
                "retention_max_age_s": 0,
                "retention_check_interval_s": 0.05,
            },
        },
        env={},
    )
    import msgstream.observability.metrics

    msgstream.observability.metrics.enable(registry)
    try:
        client = new_client(config)
    finally:
        msgstream.observability.metrics.disable()
    labels = {"backend": "rocksmq", "channel": "ch"}
    try:
        producer = await client.create_producer("ch")
        await producer.send_many([b"a", b"b", b"c"])
        consumer = await client.subscribe("ch", "sub", SubscriptionPosition.EARLIEST)
        for _ in range(3):
            last = await asyncio.wait_for(consumer.receive(), TIMEOUT)
        await consumer.ack(last)
        await client.subscribe("ch", "idle", SubscriptionPosition.LATEST)
        deleted = "msgstream_retention_deleted_messages_total"
        await until(lambda: value(registry, deleted, **labels) == 3)
        assert value(registry, deleted, **labels) == 3  # a, b, c: acknowledged by both
        await producer.send(b"d")
        backlog = "msgstream_subscription_backlog_messages"
        await until(lambda: value(registry, backlog, **labels) == 2)
        assert value(registry, "msgstream_subscriptions", **labels) == 2
        assert value(registry, backlog, subscription="sub", **labels) == 1
        assert value(registry, backlog, subscription="idle", **labels) == 1
        assert value(registry, "msgstream_store_size_bytes", backend="rocksmq") >= 0
    finally:
        await client.close()


def test_the_docs_metrics_reference_is_current() -> None:
    from msgstream.observability.metrics import metrics_reference_markdown

    section = generated_section("guide/observability.md", "metrics-reference")
    assert section == metrics_reference_markdown().strip()


@pytest.mark.parametrize(
    "backend",
    [
        "memory",
        "rocksmq",
        pytest.param("kafka", marks=pytest.mark.kafka),
        pytest.param("pulsar", marks=pytest.mark.pulsar),
    ],
    indirect=True,
)
async def test_peek_reads_one_message_by_id(backend: BackendHarness) -> None:
    """What inspect's time lag reads: a message by id, None once it is not there."""
    from msgstream.backends.pulsar.ids import PulsarMessageID
    from msgstream.contract.backend import MessageID, PeekClient

    client = backend.client()
    assert isinstance(client, PeekClient)
    channel = backend.channel("peek")
    producer = await client.create_producer(channel)
    first, second = await producer.send_many([b"one", b"two"])
    assert await client.peek(channel, second) == b"two"
    assert await client.peek(channel, first) == b"one"
    latest = await client.get_latest_msg_id(channel)
    assert latest == second
    if isinstance(second, PulsarMessageID):  # ledger and entry, not tag + int64
        beyond: MessageID = PulsarMessageID(second.ledger, second.entry + 10**6)
    else:
        beyond = client.message_id_from_bytes(second.to_bytes()[:1] + (10**6).to_bytes(8, "big"))
    assert await client.peek(channel, beyond) is None
