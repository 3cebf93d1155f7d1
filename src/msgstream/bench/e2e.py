"""``msgstream bench e2e``: produce-to-consume latency through a TtMsgStream.

For each channel count, one process produces the workload (open loop at ``--rate``,
messages stamped by a :class:`~msgstream.streams.emitter.TimeTickEmitter` that ticks every
``--tick-interval``) while a :class:`~msgstream.streams.ttstream.TtMsgStream` consumes the
channels. Three figures:

- **produce → consume**: from each message's intended send time to the delivery of the
  pack that holds it (so it includes waiting for the time tick that releases it);
- **pack delivery**: from the moment the emitter began broadcasting the tick that closed a
  pack to that pack's delivery (the barrier's and the readers' share);
- **consume throughput**: a new TtMsgStream reading everything the run produced, from the
  earliest message, in msgs/s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..cli.common import EXIT_FAILED, EXIT_OK, CliError, new_table, stdout_console
from ..configuration.config import Config, resolve_backend
from ..runtime.shutdown import StopOnSignals
from ..streams.emitter import TimeTickEmitter
from ..streams.factory import MsgStreamFactory
from ..streams.stream import MsgStream
from ..streams.ttstream import TtMsgStream
from ..wire.messages import TsMsg
from ..wire.pack import MsgPack
from ..wire.position import SubscriptionPosition
from .common import (
    announce,
    channel_names,
    delete_channels,
    single_target,
    stopped_reason,
    workload_from_args,
    write_outputs,
)
from .recorder import Recorder, Stats
from .runner import RunControl, Side
from .scheduler import Packs, Phase, run_phase
from .targets import MsgStreamTarget
from .workload import MessageFactory, Workload

DRAIN_TIMEOUT_S = 30.0


class _TimedEmitter(TimeTickEmitter):
    """Notes when the broadcast of each tick began."""

    def __init__(self, stream: MsgStream, interval_s: float) -> None:
        super().__init__(stream, interval_s=interval_s)
        self.began: dict[int, int] = {}

    async def tick(self) -> int | None:
        began = time.perf_counter_ns()
        ts = await super().tick()
        if ts is not None:
            self.began[ts] = began
        return ts


class E2ETarget(MsgStreamTarget):
    """Produces with time ticks and consumes what it produced, timing the deliveries."""

    label = "msgstream e2e"

    def __init__(self, config: Config, messages: MessageFactory, tick_interval_s: float) -> None:
        super().__init__(config)
        self.messages = messages
        self.tick_interval_s = tick_interval_s
        self.measuring = False
        self.e2e = Recorder()
        self.packs = Recorder()
        self.sent_at: dict[int, tuple[int, bool]] = {}
        self.produced = 0
        self.received = 0
        self.measured_sent = 0
        self.measured_received = 0
        self._intended = 0
        self._all_in = asyncio.Event()
        self.emitter: _TimedEmitter | None = None
        self.consumer: TtMsgStream | None = None
        self._reader: asyncio.Task[None] | None = None
        self.channel_names: list[str] = []

    async def open(self, channels: Sequence[str]) -> None:
        self.channel_names = list(channels)
        await super().open(channels)
        assert self.stream is not None
        self.emitter = _TimedEmitter(self.stream, self.tick_interval_s)
        factory = MsgStreamFactory(self.config)
        self.consumer = factory.new_ttmsgstream(pursuit_lag_s=3600.0)
        await self.consumer.as_consumer(
            list(channels), "msgstream-bench", SubscriptionPosition.EARLIEST
        )
        self._reader = asyncio.create_task(self._read())
        self.emitter.start()

    async def _read(self) -> None:
        assert self.consumer is not None and self.emitter is not None
        async for pack in self.consumer:
            now = time.perf_counter_ns()
            began = self.emitter.began.pop(pack.end_ts, None)
            measured_pack = False
            for msg in pack.msgs:
                entry = self.sent_at.pop(msg.msg_id, None)
                if entry is None:
                    continue
                intended, measured = entry
                self.received += 1
                if measured:
                    measured_pack = True
                    self.measured_received += 1
                    self.e2e.record(now - intended, 1, self.messages.message_bytes)
            if began is not None and measured_pack:
                self.packs.record(now - began)
            if self.received >= self.produced and not self.sent_at:
                self._all_in.set()

    def due(self, intended_ns: int) -> None:
        self._intended = intended_ns

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        return len(msgs)

    async def send(self, channel: int, prepared: Any) -> None:
        assert self.stream is not None and self.emitter is not None
        stamps = [self.emitter.begin() for _ in range(int(prepared))]
        try:
            msgs: list[TsMsg] = [self.messages.message(channel, ts) for ts in stamps]
            for msg in msgs:
                self.sent_at[msg.msg_id] = (self._intended, self.measuring)
            self._all_in.clear()
            await self.stream.produce(MsgPack(msgs=msgs))
            self.produced += len(msgs)
            if self.measuring:
                self.measured_sent += len(msgs)
        except BaseException:
            for ts in stamps:
                self.sent_at.pop(ts, None)
            raise
        finally:
            for ts in stamps:
                self.emitter.done(ts)

    async def drain(self) -> None:
        """Stop ticking after a last tick, wait until everything sent was delivered."""
        if self.emitter is not None:
            await self.emitter.stop(final_tick=True)
        if self.sent_at:
            self._all_in.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_in.wait(), DRAIN_TIMEOUT_S)

    async def close(self) -> None:
        if self.emitter is not None:
            await self.emitter.stop(final_tick=False)
        if self.consumer is not None:
            self.consumer.stop()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            await consumer.close()
        await super().close()


async def consume_rate(config: Config, channels: Sequence[str], expected: int) -> float:
    """msgs/s of a new TtMsgStream reading ``expected`` messages from the earliest."""
    if expected <= 0:
        return 0.0
    stream = MsgStreamFactory(config).new_ttmsgstream(pursuit_lag_s=0.0)
    seen = 0
    try:
        await stream.as_consumer(
            list(channels), "msgstream-bench-drain", SubscriptionPosition.EARLIEST
        )
        start = time.perf_counter_ns()
        async with asyncio.timeout(DRAIN_TIMEOUT_S):
            async for pack in stream:
                seen += len(pack.msgs)
                if seen >= expected:
                    break
        elapsed = (time.perf_counter_ns() - start) / 1e9
    except TimeoutError:
        return 0.0
    finally:
        await stream.close()
    return seen / elapsed if elapsed > 0 else 0.0


@dataclass
class E2ERow:
    channels: int
    rate: float
    sent: int
    received: int
    e2e: Stats
    packs: Stats
    consume_msgs_per_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "channels": self.channels,
            "rate": self.rate,
            "sent": self.sent,
            "received": self.received,
            "produce_to_consume": self.e2e.to_json(),
            "pack_delivery": self.packs.to_json(),
            "consume_msgs_per_s": round(self.consume_msgs_per_s, 3),
        }


async def run_one(
    config: Config, workload: Workload, tick_s: float, control: RunControl
) -> tuple[E2ERow, Side]:
    channels = channel_names(workload.channels, "-e2e")
    messages = MessageFactory(workload)
    target = E2ETarget(config, messages, tick_s)
    side = Side(target, f"e2e {workload.channels} ch", resolve_backend(config))
    packs = Packs(target, messages, workload)  # never prebuilt: the consumer counts msg_ids
    consumed = 0.0
    try:
        await target.open(channels)
        if workload.warmup_s > 0 and not control.stopping.is_set():
            await run_phase(Phase(packs, Recorder(), workload.warmup_s, None, control.stopping,
                                  fail_fast=True))  # fmt: skip
        target.measuring = True
        target.e2e = side.recorder = Recorder()
        target.packs = Recorder()
        began = time.perf_counter_ns()
        if not control.stopping.is_set():
            produce = Recorder()
            await run_phase(Phase(packs, produce, workload.duration_s, workload.messages,
                                  control.stopping))  # fmt: skip
            side.extra["produce_errors"] = produce.errors
        side.measured_s = (time.perf_counter_ns() - began) / 1e9
        await target.drain()
        target.e2e.finish()
        target.packs.finish()
        if not control.stopping.is_set():
            consumed = await consume_rate(config, channels, target.produced)
    finally:
        await target.close()
        await delete_channels(config, channels)
    row = E2ERow(
        channels=workload.channels,
        rate=workload.rate or 0.0,
        sent=target.measured_sent,
        received=target.measured_received,
        e2e=target.e2e.stats(),
        packs=target.packs.stats(),
        consume_msgs_per_s=consumed,
    )
    return row, side


def _ms(value: float) -> str:
    return f"{value:,.3f}"


async def run_e2e(config: Config, args: argparse.Namespace) -> int:
    try:
        counts = [int(c) for c in str(args.channel_counts).split(",") if c.strip()]
    except ValueError:
        raise CliError(
            f"--channel-counts: expected numbers like 1,4,16,64, got {args.channel_counts!r}"
        ) from None
    if not counts or min(counts) < 1:
        raise CliError("--channel-counts: each count must be >= 1")
    base = workload_from_args(args, channels=1)
    if base.rate is None:
        raise CliError("msgstream bench e2e needs --rate N (messages per second)")
    cfg = single_target(config, args)
    rows: list[E2ERow] = []
    sides: list[Side] = []
    control = RunControl()
    async with StopOnSignals(control) as stop:
        for count in counts:
            if control.stopping.is_set():
                break
            workload = Workload(**{**base.__dict__, "channels": count})
            row, side = await run_one(cfg, workload, float(args.tick_interval), control)
            rows.append(row)
            sides.append(side)
        table = new_table(
            f"msgstream bench e2e on {resolve_backend(cfg)}: {base.rate:g} msgs/s, tick every "
            f"{float(args.tick_interval):g} s",
            [("channels", "right"), ("sent", "right"), ("received", "right"),
             ("e2e p50 ms", "right"), ("e2e p99 ms", "right"), ("e2e p99.9 ms", "right"),
             ("e2e max ms", "right"), ("pack p50 ms", "right"), ("pack p99 ms", "right"),
             ("consume msgs/s", "right")],
        )  # fmt: skip
        for row in rows:
            table.add_row(
                str(row.channels), f"{row.sent:,}", f"{row.received:,}", _ms(row.e2e.ms(50.0)),
                _ms(row.e2e.ms(99.0)), _ms(row.e2e.ms(99.9)), _ms(row.e2e.max_ms),
                _ms(row.packs.ms(50.0)), _ms(row.packs.ms(99.0)), f"{row.consume_msgs_per_s:,.0f}",
            )  # fmt: skip
        stdout_console().print(table)
        write_outputs(
            args, "e2e", sides, base, baseline=None, stopped=stopped_reason(stop),
            message_bytes=MessageFactory(base).message_bytes, brokers={},
            extra={"e2e": [row.to_json() for row in rows]},
        )  # fmt: skip
        for row in rows:
            print(
                f"e2e: channels={row.channels} sent={row.sent} received={row.received} "
                f"p50_ms={row.e2e.ms(50.0):.3f} p99_ms={row.e2e.ms(99.0):.3f} "
                f"pack_p99_ms={row.packs.ms(99.0):.3f} "
                f"consume_msgs_per_s={row.consume_msgs_per_s:.0f}",
                flush=True,
            )
        announce(stop)
    if stop.received is not None:
        return stop.exit_code
    lost = any(row.received < row.sent for row in rows)
    return EXIT_FAILED if lost else EXIT_OK
