"""``msgstream ingest`` and ``msgstream demo``: their options, for the CLI's parser.

Imported each time the parser is built, so it imports nothing of Spark; the handlers
(:mod:`.ingest`, :mod:`.demo`) are imported when their command runs, and without the
``spark`` extra the command says what to install.
"""

from __future__ import annotations

import argparse

from msgstream.cli.command import Command
from msgstream.cli.common import (
    add_channel_option,
    add_count,
    add_flag,
    add_option,
    non_negative_int,
    positive_float,
    positive_int,
)
from msgstream.cli.row_lines import add_skip_invalid_option

CHECKPOINT_NAME = "_msgstream_checkpoint.json"
"""The checkpoint's default name inside ``--out`` (Spark ignores ``_`` names)."""
DEFAULT_MASTER = "local[2]"
DEMO_ROWS, DEMO_BATCH_ROWS = 24_000, 6_000
"""The demo's rows and batch size by default: five batches, the fourth one crashing."""
INSTALL = "msgstream[spark]"


def _add_master(parser: argparse.ArgumentParser) -> None:
    add_option(
        parser, "--master", "MASTER", f"Spark master (default {DEFAULT_MASTER})",
        default=DEFAULT_MASTER,
    )  # fmt: skip


def _ingest_arguments(parser: argparse.ArgumentParser) -> None:
    """Read channels through the Spark bridge's micro-batcher -- batches cut at time ticks,
    each written as a batch_id=N directory of Parquet under --out -- with an atomic
    checkpoint: a stopped or failed run resumes where it left off and the output holds
    every row exactly once. Ingests what is available at start, then exits (or keeps
    going with --follow). Without --config it reads the embedded default store."""
    add_option(parser, "--out", "DIR", "Parquet output directory", required=True)
    add_channel_option(
        parser, "channel to read (repeat for several; default: every channel of the store)"
    )
    add_option(parser, "--collection", "NAME", "collection to ingest (default: the first found)")
    add_option(
        parser, "--schema", "FILE",
        "collection schema as JSON (CollectionSchema.to_dict()); default: read from the "
        "channels' CreateCollectionMsg",
        dest="schema_file",
    )  # fmt: skip
    parser.add_argument(
        "--frame",
        choices=("changes", "inserts", "deletes"),
        default="changes",
        help="rows to write: inserts and deletes with an _op column (default), or one kind",
    )
    add_option(parser, "--checkpoint", "FILE", f"checkpoint file (default: OUT/{CHECKPOINT_NAME})")
    add_option(
        parser, "--from", "WHERE",
        "where a new job starts: 'earliest' (default), 'latest', a pack's end positions "
        "as JSON, or @FILE; ignored once a checkpoint exists",
        dest="start", default="earliest",
    )  # fmt: skip
    add_count(
        parser, "--max-rows", "close a batch once it holds N rows (at the next pack boundary)",
        100_000,
    )  # fmt: skip
    add_option(
        parser, "--first-batch-rows", "N",
        "close a run's first batch once it holds N rows (default: a quarter of --max-rows, "
        "so Spark starts sooner)",
        type=positive_int,
    )  # fmt: skip
    add_option(
        parser, "--max-interval", "SECONDS",
        "close a batch SECONDS after its first row (default 1)",
        type=positive_float, default=1.0,
    )  # fmt: skip
    add_flag(parser, "--follow", "keep ingesting new data until interrupted")
    add_flag(parser, "--json", "print the summary as one JSON object instead of a table")
    add_option(parser, "--max-batches", "N", "stop after N batches", type=positive_int)
    _add_master(parser)
    add_option(
        parser, "--spark-conf", "KEY=VALUE", "extra Spark setting (repeatable)",
        action="append", default=[],
    )  # fmt: skip


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Produce a collection (int64 key, float vector, string, JSON) with inserts and deletes
    over several channels; ingest it with Spark into Parquet, crash half-way (after a
    batch's files were written, before its checkpoint), resume, then read the Parquet
    back and check that every row is there exactly once. Exits 1 on any loss or
    duplicate. Runs on a temporary rocksmq store unless --path or --config is given."""
    add_count(parser, "--channels", "channels", 4)
    add_count(
        parser, "--rows",
        "rows to insert: 11/12 as a backlog before ingesting, the rest while it runs",
        DEMO_ROWS,
    )  # fmt: skip
    add_count(
        parser, "--batch-rows", "rows per Spark batch, at most (a pack is never split)",
        DEMO_BATCH_ROWS,
    )  # fmt: skip
    add_option(parser, "--path", "DIR", "directory for the store and output (default: temporary)")
    add_flag(parser, "--keep", "keep the temporary store, Parquet and checkpoint")
    add_option(
        parser, "--timeout", "SECONDS",
        "fail if the demo has not finished after SECONDS (default 300)",
        type=positive_float, default=300.0,
    )  # fmt: skip
    add_option(parser, "--seed", "N", "random seed", type=non_negative_int)
    _add_master(parser)


def _schema_arguments(parser: argparse.ArgumentParser) -> None:
    """Print the collection schema as JSON -- what `ingest --schema` and `produce --schema`
    take -- read from the channels' CreateCollectionMsg (written by `msgstream produce`),
    or with --infer derived from sample JSON lines: fields in order of appearance, int
    and float widened to double, a field missing or null in some row nullable. Blank
    lines are skipped; a line that is not a JSON object stops --infer (exit 2) naming its
    line and column, unless --skip-invalid (then counted and named on stderr, exit 1)."""
    add_channel_option(
        parser, "channel to read the CreateCollectionMsg from (repeat for several; default: "
        "every channel of the store)",
    )  # fmt: skip
    add_option(
        parser, "--collection", "NAME",
        "the collection (default: the first found; with --infer, its name, default "
        "msgstream_cli)",
    )  # fmt: skip
    add_option(
        parser, "--infer", "FILE",
        "infer the schema from JSON lines in FILE ('-': stdin) instead of reading channels",
    )  # fmt: skip
    add_option(
        parser, "--key", "FIELD",
        "with --infer: the primary key field (default: 'id' if it is an int or string in "
        "every row)",
    )  # fmt: skip
    add_skip_invalid_option(parser)
    add_option(parser, "--out", "FILE", "write the schema to FILE instead of stdout")


SCHEMA = Command.documented(
    "schema",
    "print a collection schema (from the channels, or inferred from JSON rows)",
    _schema_arguments,
    "msgstream.bridge_spark.cli.schema:handle",
    INSTALL,
)


INGEST = Command.documented(
    "ingest",
    "ingest channels into Parquet with Spark (the main job)",
    _ingest_arguments,
    "msgstream.bridge_spark.cli.ingest:handle",
    INSTALL,
)

DEMO = Command.documented(
    "demo",
    "produce a collection, ingest it with Spark across a crash, and verify",
    _demo_arguments,
    "msgstream.bridge_spark.cli.demo:handle",
    INSTALL,
)
