"""A producing service: orders over four channels, stamped and ticked by a TimeTickEmitter.

It first broadcasts the collection's schema (a ``CreateCollectionMsg``, so the Spark bridge
can ingest the channels without being given a schema), then sends one insert of a few rows
every ``--every`` seconds until it has sent ``--count`` of them or gets SIGINT/SIGTERM, and
ends with a final time tick, so consumers receive everything it sent. Once the first insert
is sent it says so on stderr; its result is one line on stdout.

The backend comes from the configuration (``--config FILE`` or ``$MSGSTREAM_CONFIG``; the
default is the embedded rocksmq store): the same program runs on Kafka or Pulsar with
``--config examples/kafka.yaml`` or ``--config examples/pulsar.yaml``.

    python examples/producer_service.py --count 100
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys

from msgstream import (
    CollectionSchema,
    CreateCollectionMsg,
    DataType,
    FieldData,
    FieldSchema,
    InsertMsg,
    MsgPack,
    MsgStreamError,
    StopOnSignals,
    TimeTickEmitter,
    hash_primary_keys,
    load_config,
    new_msgstream,
)

CHANNELS = ["orders-0", "orders-1", "orders-2", "orders-3"]
SCHEMA = CollectionSchema(
    "orders",
    (
        FieldSchema("order_id", DataType.INT64, is_primary=True),
        FieldSchema("amount", DataType.DOUBLE),
        FieldSchema("customer", DataType.VARCHAR),
    ),
)
ROWS_PER_INSERT = 5


def order_insert(number: int, ts: int) -> InsertMsg:
    """Insert ``number`` carries orders ``number*5 .. number*5+4`` (amount = id / 4)."""
    ids = list(range(number * ROWS_PER_INSERT, (number + 1) * ROWS_PER_INSERT))
    return InsertMsg(
        msg_id=number,
        timestamp=ts,
        collection_name=SCHEMA.name,
        row_ids=ids,
        fields=[
            FieldData("order_id", DataType.INT64, ids),
            FieldData("amount", DataType.DOUBLE, [i / 4 for i in ids]),
            FieldData("customer", DataType.VARCHAR, [f"customer-{i % 7}" for i in ids]),
        ],
        hash_keys=hash_primary_keys(ids),  # rows are routed to channels by key
    )


async def run(config_path: str | None, count: int, every_s: float) -> int:
    config = load_config(config_path)
    async with new_msgstream(config) as stream, StopOnSignals(stream) as stop:
        await stream.as_producer(CHANNELS)
        async with TimeTickEmitter(stream, interval_s=0.05) as emitter:
            async with emitter.reserve() as ts:
                schema = CreateCollectionMsg(
                    msg_id=0, timestamp=ts, collection_name=SCHEMA.name, schema=SCHEMA
                )
                await stream.broadcast(MsgPack.of(schema))
            print(f"producing to {', '.join(CHANNELS)}; SIGINT or SIGTERM stops", file=sys.stderr)
            sent = 0
            while sent < count and not stop.stopping.is_set():
                async with emitter.reserve() as ts:
                    await stream.produce(MsgPack.of(order_insert(sent, ts)))
                sent += 1
                if sent == 1:  # up and running (stdout is kept for the result line)
                    print(
                        f"producing to {', '.join(CHANNELS)}; SIGINT or SIGTERM stops it "
                        "after the current insert",
                        file=sys.stderr,
                        flush=True,
                    )
                if every_s > 0:  # a signal ends the pause at once
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.stopping.wait(), every_s)
        # leaving the emitter sent the final tick: every insert above is now readable
        stopped_by = stop.received.name if stop.received else None
        print(f"produced inserts={sent} rows={sent * ROWS_PER_INSERT} stopped_by={stopped_by}")
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
    parser.add_argument("--count", type=int, default=100, help="inserts to send")
    parser.add_argument("--every", type=float, default=0.0, help="seconds between inserts")
    args = parser.parse_args()
    log_to_stderr()
    try:
        code = asyncio.run(run(args.config, args.count, args.every))
    except MsgStreamError as exc:  # e.g. no broker answers: say so in one line
        sys.exit(f"error: {exc}")
    sys.exit(code)


if __name__ == "__main__":
    main()
