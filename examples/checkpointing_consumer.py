"""A checkpointing consumer: time-tick aligned packs, each handled once, across restarts.

It reads the channels of ``producer_service.py`` with a TtMsgStream, appends every order
it handles to ``--out`` (one line per order), then saves the pack's end positions to
``--positions`` (written to a temporary file and renamed, so a crash leaves the old or the
new checkpoint, never half of one). On start it resumes from that file when it exists:
subscribe with ``SubscriptionPosition.UNKNOWN`` and seek to the saved positions, which
yields exactly the packs after the saved one (the resume contract). A crash between the
output and the checkpoint repeats that one pack: make the handling idempotent, or write
output and positions in one transaction, where exactly-once matters.

It stops after ``--max-packs`` packs with orders in them (a pack can hold none: the one
with the schema, or a tick that came before the next insert), after ``--idle-timeout``
seconds without a pack, or on SIGINT/SIGTERM, always after finishing the pack at hand.

    python examples/checkpointing_consumer.py --out orders.txt --positions pos.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from pathlib import Path

from msgstream import (
    InsertMsg,
    MsgStreamError,
    StopOnSignals,
    SubscriptionPosition,
    TtMsgStream,
    load_config,
    new_ttmsgstream,
    positions_from_json,
    positions_to_json,
)

CHANNELS = ["orders-0", "orders-1", "orders-2", "orders-3"]


def persist(out: Path, order_ids: list[int], positions: Path, checkpoint: str) -> None:
    """Append the pack's orders to ``out``, then replace the checkpoint (both synced).

    Called through ``asyncio.to_thread``: file writes and fsync block, and an asyncio
    program keeps them off its event loop."""
    with open(out, "a", encoding="utf-8") as sink:
        sink.writelines(f"{order_id}\n" for order_id in order_ids)
        sink.flush()
        os.fsync(sink.fileno())
    tmp = positions.with_name(positions.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(checkpoint)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, positions)


def read_checkpoint(positions: Path) -> str | None:
    return positions.read_text(encoding="utf-8") if positions.exists() else None


async def subscribe(stream: TtMsgStream, subname: str, positions: Path) -> None:
    checkpoint = await asyncio.to_thread(read_checkpoint, positions)
    if checkpoint is not None:
        await stream.as_consumer(CHANNELS, subname, SubscriptionPosition.UNKNOWN)
        await stream.seek(positions_from_json(checkpoint))
    else:
        await stream.as_consumer(CHANNELS, subname, SubscriptionPosition.EARLIEST)


async def stop_when_idle(stream: TtMsgStream, progress: asyncio.Event, idle_s: float) -> None:
    """``stream.stop()`` once ``progress`` was not set for ``idle_s`` seconds (it is set as
    a pack comes and again once it is handled, so a slow disk is not taken for idleness):
    a TtMsgStream loop otherwise waits for the next tick for ever."""
    while True:
        try:  # not wait_for: on Python 3.11 it loses a cancel that meets a set event
            async with asyncio.timeout(idle_s):
                await progress.wait()
        except TimeoutError:
            stream.stop()
            return
        progress.clear()


async def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    out, positions = Path(args.out), Path(args.positions)
    orders = packs = 0
    progress = asyncio.Event()
    async with new_ttmsgstream(config) as stream, StopOnSignals(stream) as stop:
        await subscribe(stream, args.subname, positions)
        watchdog = asyncio.create_task(stop_when_idle(stream, progress, args.idle_timeout))
        try:
            async for pack in stream:
                progress.set()
                order_ids = [
                    order_id
                    for msg in pack.msgs
                    if isinstance(msg, InsertMsg)
                    for order_id in msg.row_ids.tolist()
                ]
                checkpoint = positions_to_json(pack.end_positions)
                await asyncio.to_thread(persist, out, order_ids, positions, checkpoint)
                await stream.ack(pack.end_positions)
                orders += len(order_ids)
                progress.set()
                if order_ids:
                    packs += 1
                    if packs == args.max_packs:
                        stream.stop()
        finally:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog
    stopped_by = stop.received.name if stop.received else None
    print(f"consumed orders={orders} packs={packs} stopped_by={stopped_by}")
    return stop.exit_code


def log_to_stderr() -> None:
    """Warnings and errors to stderr; not the broker clients' line for each failed
    connection attempt: msgstream raises one typed error for them, printed by main."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    for client in ("aiokafka", "msgstream.backends.pulsar.library"):
        logging.getLogger(client).setLevel(logging.CRITICAL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="msgstream YAML file (default: $MSGSTREAM_CONFIG)")
    parser.add_argument("--out", required=True, help="file the handled order ids go to")
    parser.add_argument("--positions", required=True, help="checkpoint file (JSON positions)")
    parser.add_argument("--subname", default="orders-billing", help="subscription name")
    parser.add_argument(
        "--max-packs", type=int, default=0, help="stop after N packs with orders (0: no)"
    )
    parser.add_argument("--idle-timeout", type=float, default=2.0, help="stop after N idle s")
    args = parser.parse_args()
    log_to_stderr()
    try:
        code = asyncio.run(run(args))
    except MsgStreamError as exc:  # e.g. no broker answers: say so in one line
        sys.exit(f"error: {exc}")
    sys.exit(code)


if __name__ == "__main__":
    main()
