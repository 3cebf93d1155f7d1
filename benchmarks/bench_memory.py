"""Peak memory of a TtMsgStream while one of its channels does not tick.

    python benchmarks/bench_memory.py [--messages N] [--writer inline|process] [--old]
                                      [--path DIR] [--json FILE]

A TtMsgStream on rocksmq drains N (default 10^6) Insert messages of about 4 KB over 4
channels; channel 3 is silent (no message, no tick) for the first half. A writer process
writes the first half (channels 0-2, a tick every 100 messages per channel). A consumer
process then reads until it is held (the barrier reported the stall and the loud
channels' readers are full), and the second half is written on all four channels while
it drains: by the consumer's own process (``--writer inline``, the default: one process
owns the embedded store, so the consumer's RSS includes RocksDB's write buffers), or by
the writer process (``--writer process``: the consumer reads the store opened read-only,
and its RSS includes RocksDB's catch-up of the writer's log).

Reported: the consumer's peak RSS (``ru_maxrss``), what it had read and its RSS when
held, and msgs/s of the drain and of the writer. The store (about 4 GB) is written under
``--path`` (default: the temp dir) and removed afterwards.
Goal (reliability issue): consumer peak RSS < 256 MB with the default limits.

``--old`` adds the same run with message and byte limits out of reach: the barrier
reads every channel without limit while one is silent, as before byte limits (it holds
the whole first half, about N/2 x 4 KB, in memory).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from msgstream import (
    DataType,
    FieldData,
    InsertMsg,
    MsgPack,
    MsgStream,
    SubscriptionPosition,
    TimeTickMsg,
    TsMsg,
    TtMsgStream,
    encode,
    repack_by_first_key,
)
from msgstream.backends.rocksmq import RocksOptions, open_client
from msgstream.configuration.config import MsgStreamConfig

CHANNELS = [f"mem-{i}" for i in range(4)]
SILENT = 3
DIM = 960  # float32: with the envelope and the pk, a payload of about 4.2 KB
PER_TICK = 100  # messages per channel between two ticks
BATCH = 500  # messages per produce call
VECTOR = np.random.default_rng(1).random((1, DIM), dtype=np.float32)
UNLIMITED = 1 << 62


def insert(msg_id: int, ts: int, channel: int) -> InsertMsg:
    return InsertMsg(
        msg_id=msg_id,
        timestamp=ts,
        collection_name="c",
        row_ids=[msg_id],
        fields=[
            FieldData("pk", DataType.INT64, [msg_id]),
            FieldData("v", DataType.FLOAT_VECTOR, VECTOR, dim=DIM),
        ],
        hash_keys=[channel],
    )


def script(channels: list[int], count: int, ts: int, msg_id: int) -> tuple[list[list[TsMsg]], int]:
    """``count`` messages spread over ``channels`` from timestamp ``ts`` on, with a tick
    on each after every PER_TICK of its messages (and one at the end), cut into produce
    batches; and the last timestamp used."""
    batches: list[list[TsMsg]] = []
    batch: list[TsMsg] = []
    rounds = -(-count // len(channels))
    sent = 0
    for r in range(rounds):
        ts += 1
        for c in channels:
            if sent < count:
                msg_id += 1
                sent += 1
                batch.append(insert(msg_id, ts, c))
        if (r + 1) % PER_TICK == 0 or r == rounds - 1:
            ts += 1
            batch.extend(TimeTickMsg(timestamp=ts, hash_keys=[c]) for c in channels)
            if len(batch) >= BATCH or r == rounds - 1:
                batches.append(batch)
                batch = []
    return batches, ts


async def produce(path: str, channels: list[int], count: int, ts: int, msg_id: int) -> None:
    """Write ``script(...)`` slice by slice (the whole list of messages would itself take
    gigabytes), yielding between batches so a consumer in the same loop drains."""
    chunk = PER_TICK * len(channels) * 20
    done = 0
    async with MsgStream(open_client(path, RocksOptions()), repack=repack_by_first_key) as stream:
        await stream.as_producer(CHANNELS)
        while done < count:
            part = min(chunk, count - done)
            batches, ts = script(channels, part, ts, msg_id)
            for batch in batches:
                await stream.produce(MsgPack(msgs=batch))
                await asyncio.sleep(0)
            msg_id += part
            done += part


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def write(path: str, total: int) -> None:
    """The writer process: the first half (channel SILENT silent), then, once the
    consumer says it is held, the second half on every channel."""
    half = total // 2
    loud = [c for c in range(len(CHANNELS)) if c != SILENT]
    start = time.perf_counter()
    asyncio.run(produce(path, loud, half, 0, 0))
    first_s = time.perf_counter() - start
    print("first half written", flush=True)
    if sys.stdin.readline().strip() != "go":  # the consumer writes the second half itself
        print(json.dumps({"writer_msgs_per_s": round(half / first_s)}))
        return
    start = time.perf_counter()  # the consumer is held
    # Timestamps and ids above every first-half one.
    asyncio.run(produce(path, list(range(len(CHANNELS))), total - half, 2 * total, 10 * total))
    second_s = time.perf_counter() - start
    print(
        json.dumps(
            {
                "writer_msgs_per_s": round(total / (first_s + second_s)),
                "writer_peak_rss_mb": round(peak_rss_mb(), 1),
            }
        )
    )


async def consume(path: str, total: int, limits: dict[str, int], writer: str) -> dict[str, Any]:
    """The consumer process: reads until held, says so, and drains the second half,
    written by itself (``writer == "inline"``, one process owns the store) or by the
    writer process (it reads the store opened read-only)."""
    half = total // 2
    inline = writer == "inline"
    options = RocksOptions() if inline else RocksOptions(read_only=True, poll_interval_s=0.01)
    client = open_client(path, options)
    stream = TtMsgStream(client, pursuit_lag_s=0, **limits)
    await stream.as_consumer(CHANNELS, "bench", SubscriptionPosition.EARLIEST)
    stalls = 0
    report_stall = stream.barrier.report_stall

    def counting(blocked: Any) -> None:
        nonlocal stalls
        stalls += 1
        report_stall(blocked)

    stream.barrier.report_stall = counting  # type: ignore[method-assign]
    seen = packs = 0

    async def drain() -> None:
        nonlocal seen, packs
        async for pack in stream:
            seen += len(pack.msgs)
            packs += 1
            if seen >= total:
                break

    start = time.perf_counter()
    draining = asyncio.create_task(drain())
    loud = [stream._reader(c) for i, c in enumerate(CHANNELS) if i != SILENT]
    # Held: the stall was reported and the loud readers are full; or (no limits) the
    # whole first half was read. A benchmark may look every 50 ms.
    while not ((stalls and all(r.full for r in loud)) or stream.read_stats.received >= half):  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    held = {
        "read_when_held": stream.read_stats.received,
        "packs_when_held": stream.barrier.stats.packs,
        "rss_when_held_mb": round(peak_rss_mb(), 1),
    }
    print(json.dumps(held), flush=True)
    if inline:
        # Timestamps and ids above every first-half one.
        await produce(path, list(range(len(CHANNELS))), total - half, 2 * total, 10 * total)
    await draining
    elapsed = time.perf_counter() - start
    await stream.close()
    assert seen == total, (seen, total)
    return {
        "messages": seen,
        "packs": packs,
        **held,
        "drain_seconds": round(elapsed, 1),
        "drain_msgs_per_s": round(seen / elapsed),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def child(args: argparse.Namespace) -> int:
    if args.phase == "write":
        write(args.path, args.messages)
        return 0
    limits: dict[str, int] = {}
    if args.phase == "consume-old":
        limits = {"channel_buffer_size": UNLIMITED, "channel_buffer_bytes": UNLIMITED}
    print(json.dumps(asyncio.run(consume(args.path, args.messages, limits, args.writer))))
    return 0


def run(label: str, base: str, messages: int, writer_mode: str) -> dict[str, Any]:
    """One run: a writer process and a consumer process (``ru_maxrss`` is its own)."""
    path = tempfile.mkdtemp(prefix="bench-memory-", dir=base)
    common = [sys.executable, __file__, "--messages", str(messages), "--path", path]
    common += ["--writer", writer_mode]
    pipe = subprocess.PIPE
    try:
        with subprocess.Popen([*common, "--phase", "write"], stdin=pipe, stdout=pipe) as writer:
            assert writer.stdin is not None and writer.stdout is not None
            writer.stdout.readline()  # first half written
            if writer_mode == "inline":  # the consumer writes the second half
                written, _ = writer.communicate(b"stop\n")
            phase = "consume-old" if label == "old" else "consume"
            with subprocess.Popen([*common, "--phase", phase], stdout=pipe) as consumer:
                assert consumer.stdout is not None
                consumer.stdout.readline()  # held
                if writer_mode == "process":
                    written, _ = writer.communicate(b"go\n")
                consumed, _ = consumer.communicate()
            if writer.returncode or consumer.returncode:
                raise RuntimeError(
                    f"{label}: writer {writer.returncode}, consumer {consumer.returncode}"
                )
        result: dict[str, Any] = json.loads(consumed.decode().strip().splitlines()[-1])
        result.update(json.loads(written.decode().strip().splitlines()[-1]))
        return result
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in all")
    parser.add_argument("--path", help="directory for the store (removed afterwards)")
    parser.add_argument("--old", action="store_true", help="also run without limits")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument(
        "--writer",
        choices=["inline", "process"],
        default="inline",
        help="who writes the second half: the consumer's own process (default; one "
        "process owns the embedded store) or the writer process, the consumer reading "
        "the store opened read-only",
    )
    parser.add_argument("--phase", choices=["write", "consume", "consume-old"], help="internal")
    args = parser.parse_args()
    if args.phase:
        return child(args)
    base = args.path or tempfile.gettempdir()
    defaults = MsgStreamConfig()
    print(
        f"{args.messages:,} messages of {len(encode(insert(1, 1, 0))):,} B over "
        f"{len(CHANNELS)} channels, channel {SILENT} silent for the first half; limits "
        f"per channel: reader {defaults.receive_buffer_bytes >> 20} MiB / "
        f"{defaults.receive_buffer_size} msgs, barrier {defaults.tt_channel_buffer_bytes >> 20}"
        f" MiB / {defaults.tt_channel_buffer_size} msgs",
        file=sys.stderr,
    )
    figures = {"bounded": run("bounded", base, args.messages, args.writer)}
    if args.old:
        figures["old (no limits)"] = run("old", base, args.messages, args.writer)
    for label, result in figures.items():
        print(f"{label}: {json.dumps(result)}")
    goal = figures["bounded"]["peak_rss_mb"] < 256
    peak = figures["bounded"]["peak_rss_mb"]
    print(f"peak RSS {peak} MB: goal < 256 MB {'met' if goal else 'MISSED'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
