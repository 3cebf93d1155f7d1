"""``make chaos``: fault scenarios against the real parts, summed up in one table.

Each scenario is self-contained (its own temporary directory, store or broker, loopback
only) and bounded in time. For each it counts the messages acknowledged (a send that
returned), those **lost** (acknowledged, then missing or different, *without* a typed
error saying so), those **duplicated** (delivered more than once), and the longest time
an operation took to fail (a send to a dead broker, an open of a damaged store).

    python benchmarks/chaos.py                   # every scenario
    python benchmarks/chaos.py --only rocksmq    # scenarios whose name contains "rocksmq"
    python benchmarks/chaos.py --small           # small counts (what tests/test_chaos.py runs)

Kafka and Pulsar start the tests' local brokers (tests/brokers, JVMs from Maven Central);
the disk-full scenario mounts a tmpfs (needs root). A scenario that cannot run says why
in its row instead of failing the others.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from report import tests_on_path

tests_on_path()

import pytest  # noqa: E402 (tests/helpers/mounts.py skips through pytest's exceptions)

from helpers.mounts import tmpfs  # noqa: E402
from helpers.rocksmq_child import Child  # noqa: E402
from msgstream import (  # noqa: E402
    BackendUnavailableError,
    DeleteMsg,
    MsgPack,
    MsgStream,
    MsgStreamError,
    StoreError,
    SubscriptionPosition,
    TimeTickMsg,
    config_from_dict,
    new_msgstream,
)
from msgstream.backends.rocksmq import RocksStore, open_client  # noqa: E402
from test_rocksmq_durability import produce_and_kill  # noqa: E402

CHILD = str(Path(__file__).resolve().parent / "chaos_child.py")
EARLIEST = SubscriptionPosition.EARLIEST
COLUMNS = (
    "fault",
    "messages acknowledged",
    "lost",
    "duplicated",
    "longest time to error",
    "what happened",
)


@dataclass
class Row:
    """One scenario's line of the table."""

    fault: str
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    error_seconds: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    outcome: str = ""

    def failed(self, what: str, seconds: float) -> None:
        """Count a typed error (its class name) that took ``seconds``."""
        self.errors[what] += 1
        self.error_seconds.append(seconds)

    def cells(self) -> list[str]:
        longest = f"{max(self.error_seconds):.2f} s" if self.error_seconds else "-"
        seen = ", ".join(f"{count} {name}" for name, count in sorted(self.errors.items()))
        outcome = "; ".join(part for part in (self.outcome, seen and f"errors: {seen}") if part)
        return [
            self.fault,
            str(self.acknowledged),
            str(self.lost),
            str(self.duplicated),
            longest,
            outcome,
        ]


@dataclass(frozen=True)
class Sizes:
    """Per-scenario counts: ``make chaos`` uses the defaults, the test ``small()``."""

    writer_kills: int = 6
    acks_per_life: int = 3000
    consumer_kills: int = 8
    consumer_messages: int = 20_000
    broker_outages: int = 3
    sends_between_outages: int = 300
    damaged_messages: int = 20_000
    wal_stores: int = 4

    @classmethod
    def small(cls) -> Sizes:
        return cls(2, 300, 2, 600, 1, 50, 2000, 1)


def table(rows: list[Row]) -> str:
    """The rows as one Markdown table."""
    lines = [list(COLUMNS), *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    numeric = {1, 2, 3, 4}

    def show(line: list[str]) -> str:
        cells = [
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        return "| " + " | ".join(cells) + " |"

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if i in numeric else "-" * (w + 2) for i, w in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([show(lines[0]), rule, *map(show, lines[1:])])


def _lost(acked: dict[tuple[str, int], bytes], found: dict[tuple[str, int], bytes]) -> int:
    return sum(1 for key, payload in acked.items() if found.get(key) != payload)


def _read_store(path: Path, row: Row) -> dict[tuple[str, int], bytes] | None:
    """Every record of the store at ``path`` by (channel, id); None if opening or reading
    it raised a typed error (counted in ``row``)."""
    started = time.monotonic()
    try:
        store = RocksStore(str(path))
        try:
            found: dict[tuple[str, int], bytes] = {}
            for channel in store.list_channels():
                for record in store.read(channel, 0, 10_000_000):
                    if (channel, record.msg_id) in found:
                        row.duplicated += 1
                    found[channel, record.msg_id] = record.payload
            return found
        finally:
            store.close()
    except StoreError as exc:
        row.failed(type(exc).__name__, time.monotonic() - started)
        return None


# --- rocksmq ---------------------------------------------------------------------------------
def _acked_by_children(path: Path, lives: int, acks: int) -> dict[tuple[str, int], bytes]:
    """Run the producing child ``lives`` times, each SIGKILLed after ``acks`` acks."""
    acked: dict[tuple[str, int], bytes] = {}
    for _ in range(lives):
        for channel, pairs in produce_and_kill(path, sync=False, min_acks=acks).items():
            for msg_id, seq in pairs:
                acked[channel, msg_id] = f"{channel}:{seq}".encode()
    return acked


def rocksmq_writer_sigkill(workdir: Path, sizes: Sizes) -> Row:
    row = Row(f"rocksmq writer SIGKILLed mid-produce, {sizes.writer_kills} times")
    path = workdir / "store"
    acked = _acked_by_children(path, sizes.writer_kills, sizes.acks_per_life)
    row.acknowledged = len(acked)
    found = _read_store(path, row)
    if found is None:
        row.outcome = "the store did not open after the kills"
    else:
        row.lost = _lost(acked, found)
        row.outcome = (
            f"reopened with {len(found) - len(acked) + row.lost} unacknowledged sends kept"
        )
    return row


WAL_DAMAGE_AT = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Where in the write-ahead log the garbage goes, one damaged copy of the store each."""


def rocksmq_wal_garbage(workdir: Path, sizes: Sizes) -> Row:
    """Stores killed mid-produce, each damaged at every place of ``WAL_DAMAGE_AT`` (one
    copy per place): where the garbage lands decides what RocksDB notices."""
    copies = sizes.wal_stores * len(WAL_DAMAGE_AT)
    row = Row(f"rocksmq: garbage in the write-ahead log after an unclean stop, {copies} copies")
    refused = 0
    silent: list[str] = []
    for store in range(sizes.wal_stores):
        original = workdir / f"store-{store}"
        acked = _acked_by_children(original, 1, sizes.acks_per_life)
        for index, fraction in enumerate(WAL_DAMAGE_AT):
            path = workdir / f"copy-{store}-{index}"
            # the killed owner's socket file stays behind; a socket cannot be copied
            shutil.copytree(original, path, ignore=shutil.ignore_patterns("owner.sock"))
            wal = max(path.glob("*.log"), key=lambda p: p.stat().st_size)
            with wal.open("r+b") as handle:
                handle.seek(int(wal.stat().st_size * fraction))
                handle.write(b"\xde\xad\xbe\xef" * 64)
            row.acknowledged += len(acked)
            found = _read_store(path, row)
            if found is None:
                refused += 1
                continue
            lost = _lost(acked, found)
            row.lost += lost
            if lost:
                silent.append(f"{fraction:.0%}")
    where = f" (damage at {', '.join(silent)} of the log)" if silent else ""
    row.outcome = f"{refused} copies refused at open, {len(silent)} opened missing messages{where}"
    return row


async def rocksmq_sst_damage(workdir: Path, sizes: Sizes) -> Row:
    row = Row("rocksmq: a damaged table (.sst) block")
    path = workdir / "store"
    store = RocksStore(str(path))
    store.ensure_channel("ch")
    acked: dict[tuple[str, int], bytes] = {}
    rng = random.Random(1)
    for start in range(0, sizes.damaged_messages, 1000):
        payloads = [b"%06d" % i + rng.randbytes(94) for i in range(start, start + 1000)]
        ids = store.append("ch", payloads, {})
        acked.update((("ch", i), p) for i, p in zip(ids, payloads, strict=True))
    row.acknowledged = len(acked)
    store.flush()
    store.close()
    table_file = max(path.glob("*.sst"), key=lambda p: p.stat().st_size)
    with table_file.open("r+b") as handle:
        handle.seek(table_file.stat().st_size // 3)
        handle.write(b"\0" * 64)
    # Read as an application does: a consumer from the earliest message.
    found: dict[tuple[str, int], bytes] = {}
    started = time.monotonic()
    try:
        client = open_client(str(path))
        try:
            consumer = await client.subscribe("ch", "chaos", EARLIEST)
            while len(found) < len(acked):
                msg = await asyncio.wait_for(consumer.receive(), 5.0)
                found["ch", msg.msg_id.value] = msg.payload  # type: ignore[attr-defined]
                started = time.monotonic()
        finally:
            await client.close()
    except StoreError as exc:
        row.failed(type(exc).__name__, time.monotonic() - started)
        row.outcome = f"reads stopped at id {len(found) + 1} with an error naming what is lost"
        return row
    except TimeoutError:
        row.outcome = f"reads stopped after {len(found)} messages without an error"
    row.lost = _lost(acked, found)
    return row


async def rocksmq_disk_full(workdir: Path, sizes: Sizes) -> Row:
    row = Row("rocksmq: disk full (8 MiB tmpfs), then space freed")
    try:
        mounted = tmpfs(workdir / "small", "8m")
        mount = mounted.__enter__()
    except (pytest.skip.Exception, pytest.fail.Exception) as exc:
        row.outcome = f"not run: {exc}"
        return row
    try:
        filler = mount / "filler"
        filler.write_bytes(b"\0" * 6_000_000)
        path = mount / "store"
        acked: dict[tuple[str, int], bytes] = {}
        client = open_client(str(path))
        try:
            producer = await client.create_producer("ch")
            full = 0
            for i in range(2000):
                payload = b"%05d" % i + b"x" * 20_000
                started = time.monotonic()
                try:
                    msg_id = await producer.send(payload)
                except MsgStreamError as exc:
                    row.failed(type(exc).__name__, time.monotonic() - started)
                    full += 1
                    if full == 3:
                        break
                    continue
                acked["ch", msg_id.value] = payload  # type: ignore[attr-defined]
            filler.unlink()
            resumed, last_error = 0, ""
            for i in range(5):
                payload = b"after-%d" % i
                started = time.monotonic()
                try:
                    msg_id = await producer.send(payload)
                except MsgStreamError as exc:
                    row.failed(type(exc).__name__, time.monotonic() - started)
                    last_error = str(exc)
                    await asyncio.sleep(0.2)
                    continue
                acked["ch", msg_id.value] = payload  # type: ignore[attr-defined]
                resumed += 1
            row.outcome = (
                f"writes resumed by themselves once space was freed ({resumed} of 5)"
                if resumed == 5
                else f"after space was freed, {5 - resumed} of 5 writes still failed ({last_error})"
            )
        finally:
            try:
                await client.close()
            except MsgStreamError as exc:
                row.failed(type(exc).__name__, 0.0)
        row.acknowledged = len(acked)
        found = _read_store(path, row)
        row.lost = len(acked) if found is None else _lost(acked, found)
    finally:
        mounted.__exit__(None, None, None)
    return row


def ttstream_consumer_sigkill(workdir: Path, sizes: Sizes) -> Row:
    """A checkpointing TtMsgStream consumer (benchmarks/chaos_child.py) SIGKILLed at random
    packs; each new one resumes from the saved positions."""
    row = Row(f"TtMsgStream consumer SIGKILLed while checkpointing, {sizes.consumer_kills} times")
    path = workdir / "store"
    channels = ["left", "right"]
    sent = asyncio.run(_produce_with_ticks(path, channels, sizes.consumer_messages))
    row.acknowledged = len(sent)
    checkpoint = workdir / "checkpoint.json"
    delivered: Counter[str] = Counter()
    rng = random.Random(7)
    for life in range(sizes.consumer_kills + 1):
        # Nothing more to deliver: a new consumer must deliver nothing (wait briefly).
        wait_s = 1.0 if set(delivered) >= sent else 15.0
        child = Child(str(path), str(checkpoint), "0.002", *channels, script=CHILD)
        try:
            # A pack per 100 messages: the kills spread over them, at a random moment.
            most = max(1, sizes.consumer_messages // 100 // (sizes.consumer_kills + 1))
            packs = rng.randint(1, most) if life < sizes.consumer_kills else None
            lines: list[str] = []
            while packs is None or packs > 0:
                try:
                    line = child.line(timeout=wait_s)
                except AssertionError:  # nothing for a while, or the child died
                    if child.proc.poll() is not None:
                        row.outcome = f"a consumer died: {child.stderr().strip()[-300:]}; "
                    break
                lines.append(line)
                if line == "CKPT" and packs is not None:
                    packs -= 1
                if line.startswith("MSGS") and len(set(delivered) | _names(lines)) >= len(sent):
                    break
            time.sleep(rng.random() * 0.02)  # mid-pack, or between print and checkpoint
            lines += child.kill()
        finally:
            child.close()
        for line in lines:
            delivered.update(_names([line]))
    row.duplicated = sum(count - 1 for count in delivered.values())
    row.lost = len(sent - set(delivered))
    row.outcome += f"{len(set(delivered) & sent)} of {len(sent)} delivered"
    return row


def _names(lines: list[str]) -> set[str]:
    return {name for line in lines if line.startswith("MSGS ") for name in line.split()[1:]}


async def _produce_with_ticks(path: Path, channels: list[str], count: int) -> set[str]:
    """``count`` Deletes over ``channels``, a time tick on each after every 100."""
    config = config_from_dict({"mq": {"type": "rocksmq"}, "rocksmq": {"path": str(path)}}, env={})
    sent: set[str] = set()
    async with new_msgstream(config) as stream:
        await stream.as_producer(channels)
        for i in range(1, count + 1):
            lane = i % len(channels)
            msg = DeleteMsg(
                msg_id=i, timestamp=i, collection_name="c", primary_keys=[i], hash_keys=[lane]
            )
            await stream.produce(MsgPack.of(msg))
            sent.add(f"{channels[lane]}/{i}")
            if i % 100 == 0 or i == count:
                await stream.broadcast(MsgPack.of(TimeTickMsg(msg_id=0, timestamp=i)))
    return sent


# --- brokers ---------------------------------------------------------------------------------
async def _through_outages(
    config: dict[str, Any], sizes: Sizes, outage: Callable[[], None], row: Row
) -> None:
    """Send Deletes one by one while ``outage`` (run in a thread) takes the broker down and
    brings it back, ``sizes.broker_outages`` times; then read everything back."""
    cfg = config_from_dict(config, env={})
    channel = f"chaos-{os.getpid()}-{int(time.time())}"
    acked: list[int] = []
    next_id = 1

    async def send(stream: MsgStream) -> None:
        nonlocal next_id
        msg_id, next_id = next_id, next_id + 1
        msg = DeleteMsg(
            msg_id=msg_id,
            timestamp=msg_id,
            collection_name="c",
            primary_keys=[msg_id],
            hash_keys=[0],
        )
        started = time.monotonic()
        try:
            await stream.produce(MsgPack.of(msg))
        except MsgStreamError as exc:
            row.failed(type(exc).__name__, time.monotonic() - started)
            return
        acked.append(msg_id)

    async with new_msgstream(cfg) as producer:
        await producer.as_producer([channel])
        for _ in range(sizes.broker_outages):
            for _ in range(sizes.sends_between_outages):
                await send(producer)
            down = asyncio.ensure_future(asyncio.to_thread(outage))
            while not down.done():
                await send(producer)
            await down
        for _ in range(sizes.sends_between_outages):
            await send(producer)
    row.acknowledged = len(acked)
    received: Counter[int] = Counter()
    wanted = set(acked)
    async with new_msgstream(cfg) as consumer:
        await consumer.as_consumer([channel], "chaos", EARLIEST)
        with contextlib.suppress(TimeoutError):
            while not wanted <= set(received):
                pack = await asyncio.wait_for(anext(consumer), 30.0)
                received.update(m.msg_id for m in pack.msgs)
    row.lost = len(wanted - set(received))
    row.duplicated = sum(count - 1 for count in received.values())
    others = {name for name in row.errors if name != BackendUnavailableError.__name__}
    row.outcome = "every failure a BackendUnavailableError" if not others else "untyped failures"


async def kafka_broker_sigkill(workdir: Path, sizes: Sizes) -> Row:
    from brokers.kafka import LocalKafka

    timeout = 2.0
    row = Row(
        f"Kafka broker SIGKILLed mid-produce (acks=all, timeout {timeout:g} s), "
        f"{sizes.broker_outages} times"
    )
    broker = LocalKafka(workdir / "kafka")
    try:
        await asyncio.to_thread(broker.start)

        def outage() -> None:
            broker.kill()
            time.sleep(3.0)
            broker.start()

        config = {
            "mq": {"type": "kafka"},
            "kafka": {"brokers": broker.bootstrap, "acks": "all"},
            "msgstream": {"operation_timeout_s": timeout},
        }
        await _through_outages(config, sizes, outage, row)
    finally:
        broker.close()
    return row


async def pulsar_broker_restart(workdir: Path, sizes: Sizes) -> Row:
    from brokers.pulsar import LocalPulsar

    timeout = 5.0
    row = Row(
        f"Pulsar broker restarted mid-produce (timeout {timeout:g} s), {sizes.broker_outages} times"
    )
    broker = LocalPulsar(workdir / "pulsar")
    try:
        await asyncio.to_thread(broker.start)

        def outage() -> None:
            broker.stop()
            broker.start()

        config = {
            "mq": {"type": "pulsar"},
            "pulsar": {"address": broker.service_url, "admin_url": broker.admin_url},
            "msgstream": {"operation_timeout_s": timeout},
        }
        await _through_outages(config, sizes, outage, row)
    finally:
        broker.close()
    return row


# --- running ---------------------------------------------------------------------------------
Scenario = Callable[[Path, Sizes], "Row | Awaitable[Row]"]
SCENARIOS: dict[str, Scenario] = {
    "rocksmq-writer-sigkill": rocksmq_writer_sigkill,
    "ttstream-consumer-sigkill": ttstream_consumer_sigkill,
    "kafka-broker-sigkill": kafka_broker_sigkill,
    "pulsar-broker-restart": pulsar_broker_restart,
    "rocksmq-wal-garbage": rocksmq_wal_garbage,
    "rocksmq-sst-damage": rocksmq_sst_damage,
    "rocksmq-disk-full": rocksmq_disk_full,
}


def run(names: list[str], sizes: Sizes) -> list[Row]:
    """Run the named scenarios one after the other; a scenario that breaks gets a row
    saying how, and the others still run."""
    rows = []
    for name in names:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"msgstream-chaos-{name}-") as tmp:
            try:
                result = SCENARIOS[name](Path(tmp), sizes)
                row = asyncio.run(result) if asyncio.iscoroutine(result) else result  # type: ignore[arg-type]
            except Exception as exc:
                traceback.print_exc()
                row = Row(name, outcome=f"scenario broke: {type(exc).__name__}: {exc}"[:200])
        print(f"{name}: {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    # The broker clients log every refused connection while a broker is down: the table
    # counts those failures already.
    for name in ("aiokafka", "pulsar"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run scenarios whose name contains this")
    parser.add_argument("--small", action="store_true", help="small counts (a quick check)")
    args = parser.parse_args(argv)
    names = [name for name in SCENARIOS if args.only in name]
    if not names:
        parser.error(f"no scenario matches {args.only!r}; known: {', '.join(SCENARIOS)}")
    rows = run(names, Sizes.small() if args.small else Sizes())
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
