"""``msgstream schema``: print or write a collection schema, as ``ingest --schema`` and
``produce --schema`` take it.

Read from the channels' ``CreateCollectionMsg`` (what ``msgstream produce`` writes), or
inferred from sample JSON rows with ``--infer``. Needs no Spark.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from msgstream.cli.common import CliError
from msgstream.cli.json_rows import RowMismatch, infer_schema
from msgstream.cli.row_lines import BadLines, RowLines, stdin_lines
from msgstream.configuration.config import Config
from msgstream.wire.schema import CollectionSchema

from ..data.schema_lookup import find_collection_schema
from .ingest import default_channels


def _infer(source: str, collection: str, key: str | None, bad: BadLines) -> CollectionSchema:
    """The schema of the rows of ``source`` (a file, or '-': stdin); bad lines go to
    ``bad``."""
    try:
        if source == "-":
            return infer_schema(_rows("stdin", stdin_lines(), bad), collection, key)
        with Path(source).expanduser().open("rb") as stream:
            return infer_schema(_rows(source, stream, bad), collection, key)
    except OSError as exc:
        raise CliError(f"--infer: cannot read {source}: {exc.strerror or exc}") from None
    except (RowMismatch, ValueError) as exc:
        raise CliError(f"--infer: {exc}") from None


def _rows(source: str, lines: Iterable[str | bytes], bad: BadLines) -> Iterator[dict[str, Any]]:
    return (row for _, row in RowLines(source, bad).rows(lines))


async def handle(config: Config, args: argparse.Namespace) -> int:
    bad = BadLines(args.skip_invalid)
    if args.infer is not None:
        if args.channels:
            raise CliError("--infer reads rows, not channels: drop --channel")
        # reading a file or stdin blocks: off the event loop
        schema = await asyncio.to_thread(
            _infer, args.infer, args.collection or "msgstream_cli", args.key, bad
        )
    else:
        if args.key is not None:
            raise CliError("--key names the primary key of an inferred schema: add --infer")
        if bad.skip:
            raise CliError("--skip-invalid skips lines of the rows --infer reads: add --infer")
        channels = args.channels or await default_channels(config)
        schema = await find_collection_schema(config, channels, args.collection)
    text = orjson.dumps(schema.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        await asyncio.to_thread(_write, args.out, text)
    if bad.count:
        print(f"schema: inferred without the lines skipped: {bad.summary()}", file=sys.stderr)
    return bad.exit_code


def _write(path: str, text: str) -> None:
    try:
        Path(path).expanduser().write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"--out: cannot write {path}: {exc.strerror or exc}") from None
