"""``msgstream ingest`` and ``msgstream demo``: their options, for the CLI's parser.

Imported each time the parser is built, so it imports nothing of Spark; the handlers
(:mod:`.ingest`, :mod:`.demo`) are imported when their command runs, and without the
``spark`` extra the command says what to install.
"""

from __future__ import annotations

import argparse

from msgstream.cli.command import Command
from msgstream.cli.common import add_channel_option, non_negative_int, positive_float, positive_int

CHECKPOINT_NAME = "_msgstream_checkpoint.json"
"""The checkpoint's default name inside ``--out`` (Spark ignores ``_`` names)."""
DEFAULT_MASTER = "local[2]"
INSTALL = "msgstream[spark]"


def _add_master(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master", default=DEFAULT_MASTER, help=f"Spark master (default {DEFAULT_MASTER})"
    )


def _ingest_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="DIR", help="Parquet output directory")
    add_channel_option(
        parser, "channel to read (repeat for several; default: every channel of the store)"
    )
    parser.add_argument(
        "--collection", metavar="NAME", help="collection to ingest (default: the first found)"
    )
    parser.add_argument(
        "--schema",
        dest="schema_file",
        metavar="FILE",
        help="collection schema as JSON (CollectionSchema.to_dict()); default: read from the "
        "channels' CreateCollectionMsg",
    )
    parser.add_argument(
        "--frame",
        choices=("changes", "inserts", "deletes"),
        default="changes",
        help="rows to write: inserts and deletes with an _op column (default), or one kind",
    )
    parser.add_argument(
        "--checkpoint", metavar="FILE", help=f"checkpoint file (default: OUT/{CHECKPOINT_NAME})"
    )
    parser.add_argument(
        "--from",
        dest="start",
        default="earliest",
        metavar="WHERE",
        help="where a new job starts: 'earliest' (default), 'latest', a pack's end positions "
        "as JSON, or @FILE; ignored once a checkpoint exists",
    )
    parser.add_argument(
        "--max-rows",
        type=positive_int,
        default=100_000,
        metavar="N",
        help="close a batch once it holds N rows (at the next pack boundary; default 100000)",
    )
    parser.add_argument(
        "--max-interval",
        type=positive_float,
        default=1.0,
        metavar="SECONDS",
        help="close a batch SECONDS after its first row (default 1)",
    )
    parser.add_argument(
        "--follow", action="store_true", help="keep ingesting new data until interrupted"
    )
    parser.add_argument(
        "--max-batches", type=positive_int, metavar="N", help="stop after N batches"
    )
    _add_master(parser)
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable)",
    )


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--channels", type=positive_int, default=4, metavar="N", help="channels (default 4)"
    )
    parser.add_argument(
        "--rows", type=positive_int, default=20000, metavar="N", help="rows to insert (20000)"
    )
    parser.add_argument(
        "--batch-rows",
        type=positive_int,
        default=4000,
        metavar="N",
        help="rows per Spark batch, at most (a pack is never split; default 4000)",
    )
    parser.add_argument(
        "--path", metavar="DIR", help="directory for the store and output (default: temporary)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary store, Parquet and checkpoint"
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=300.0,
        metavar="SECONDS",
        help="fail if the demo has not finished after SECONDS (default 300)",
    )
    parser.add_argument("--seed", type=non_negative_int, metavar="N", help="random seed")
    _add_master(parser)


INGEST = Command(
    name="ingest",
    help="ingest channels into Parquet with Spark (the main job)",
    description=(
        "Read channels through the Spark bridge's micro-batcher -- batches cut at time "
        "ticks, each written as a batch_id=N directory of Parquet under --out -- with "
        "an atomic checkpoint: a stopped or failed run resumes where it left off and the "
        "output holds every row exactly once. Ingests what is available at start, then "
        "exits (or keeps going with --follow). Without --config it reads the embedded "
        "default store."
    ),
    add_arguments=_ingest_arguments,
    handler="msgstream.bridge_spark.cli.ingest:handle",
    install=INSTALL,
)

DEMO = Command(
    name="demo",
    help="produce a collection, ingest it with Spark across a crash, and verify",
    description=(
        "Produce a collection (int64 key, float vector, string, JSON) with inserts and "
        "deletes over several channels; ingest it with Spark into Parquet, crash half-way "
        "(after a batch's files were written, before its checkpoint), resume, then read "
        "the Parquet back and check that every row is there exactly once. Exits 1 on any "
        "loss or duplicate. Runs on a temporary rocksmq store unless --path or --config "
        "is given."
    ),
    add_arguments=_demo_arguments,
    handler="msgstream.bridge_spark.cli.demo:handle",
    install=INSTALL,
)
