"""A TtMsgStream consumer that checkpoints, run (and SIGKILLed) by benchmarks/chaos.py.

Usage: ``python chaos_child.py PATH CHECKPOINT WORK_S CHANNEL...``: consume the rocksmq
store at PATH from the positions saved in CHECKPOINT (from the earliest message if there is
none), and for every pack print ``MSGS <channel>/<msg_id> ...`` (the messages it
processed), work on it for WORK_S seconds, then save the pack's end positions to
CHECKPOINT (atomically: written aside, then renamed) and print ``CKPT``. Runs until
killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from msgstream import (
    SubscriptionPosition,
    config_from_dict,
    new_ttmsgstream,
    positions_from_json,
    positions_to_json,
)


async def consume(
    path: str, checkpoint: Path, saved: bytes | None, work_s: float, channels: list[str]
) -> None:
    config = config_from_dict({"mq": {"type": "rocksmq"}, "rocksmq": {"path": path}}, env={})
    async with new_ttmsgstream(config, pursuit_lag_s=0) as stream:
        if saved is not None:
            await stream.as_consumer(channels, "chaos", SubscriptionPosition.UNKNOWN)
            await stream.seek(positions_from_json(saved))
        else:
            await stream.as_consumer(channels, "chaos", SubscriptionPosition.EARLIEST)
        aside = checkpoint.with_suffix(".new")
        async for pack in stream:
            if pack.msgs:
                names = [f"{m.position.channel}/{m.msg_id}" for m in pack.msgs if m.position]
                sys.stdout.write("MSGS " + " ".join(names) + "\n")
                sys.stdout.flush()
            await asyncio.sleep(work_s)
            with open(aside, "w") as new:  # noqa: ASYNC230 (the checkpoint is the point)
                new.write(positions_to_json(pack.end_positions))
            os.replace(aside, checkpoint)
            sys.stdout.write("CKPT\n")
            sys.stdout.flush()


if __name__ == "__main__":
    checkpoint = Path(sys.argv[2])
    saved = checkpoint.read_bytes() if checkpoint.exists() else None
    asyncio.run(consume(sys.argv[1], checkpoint, saved, float(sys.argv[3]), sys.argv[4:]))
