"""Peak memory of a TtMsgStream while one of its channels does not tick.

    python benchmarks/bench_memory.py [--messages N] [--path DIR] [--old] [--json FILE]

A TtMsgStream on rocksmq drains N (default 10^6) Insert messages of about 4 KB over 4
channels; channel 3 is silent (no message, no tick) for the first half. The first half
(channels 0-2) is written by a child process before the consumer starts; the consumer,
in a child process of its own, reads until it is held (the barrier reports the stall and
the loud channels' readers are full), then produces the second half on all four channels
in batches while it drains. Reported: peak RSS of the consumer process
(``ru_maxrss``), what it had read when the stall held, and msgs/s over the whole drain.
Goal (reliability issue): peak RSS < 256 MB with the default limits.

``--old`` adds the same run with message and byte limits set out of reach, i.e. the
barrier reading every channel without limit while one is silent, as before byte limits
(it holds the whole first half, about N/2 x 4 KB, in memory).
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

from backends.rocksmq import RocksOptions, open_client
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
from msgstream.config import MsgStreamConfig

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


def fill_first_half(path: str, total: int) -> None:
    loud = [c for c in range(len(CHANNELS)) if c != SILENT]
    asyncio.run(produce(path, loud, total // 2, 0, 0))


async def consume(path: str, total: int, limits: dict[str, int]) -> dict[str, Any]:
    half = total // 2
    stream = TtMsgStream(open_client(path, RocksOptions()), pursuit_lag_s=0, **limits)
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
        "seconds": round(elapsed, 1),
        "msgs_per_s": round(seen / elapsed),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def child(args: argparse.Namespace) -> int:
    if args.phase == "fill":
        fill_first_half(args.path, args.messages)
        print(json.dumps({"fill_peak_rss_mb": round(peak_rss_mb(), 1)}))
        return 0
    limits: dict[str, int] = {}
    if args.phase == "consume-old":
        limits = {"channel_buffer_size": UNLIMITED, "channel_buffer_bytes": UNLIMITED}
    print(json.dumps(asyncio.run(consume(args.path, args.messages, limits))))
    return 0


def run(label: str, base: str, messages: int) -> dict[str, Any]:
    """One run in fresh processes (so ``ru_maxrss`` is the consumer's own)."""
    path = tempfile.mkdtemp(prefix="bench-memory-", dir=base)
    try:
        common = [sys.executable, __file__, "--messages", str(messages), "--path", path]
        start = time.perf_counter()
        fill = subprocess.run([*common, "--phase", "fill"], check=True, capture_output=True)
        fill_s = time.perf_counter() - start
        phase = "consume-old" if label == "old" else "consume"
        out = subprocess.run([*common, "--phase", phase], check=True, capture_output=True)
        result: dict[str, Any] = json.loads(out.stdout.decode().strip().splitlines()[-1])
        result.update(json.loads(fill.stdout.decode().strip().splitlines()[-1]))
        result["fill_seconds"] = round(fill_s, 1)
        return result
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in all")
    parser.add_argument("--path", help="directory for the store (removed afterwards)")
    parser.add_argument("--old", action="store_true", help="also run without limits")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--phase", choices=["fill", "consume", "consume-old"], help="internal")
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
    figures = {"bounded": run("bounded", base, args.messages)}
    if args.old:
        figures["old (no limits)"] = run("old", base, args.messages)
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
