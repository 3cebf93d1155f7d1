"""``msgstream schema``: print or write a collection schema, as ``ingest --schema`` and
``produce --schema`` take it.

Read from the channels' ``CreateCollectionMsg`` (what ``msgstream produce`` writes), or
inferred from sample JSON rows with ``--infer``. Needs no Spark.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import orjson

from msgstream.cli.common import EXIT_OK, CliError
from msgstream.cli.json_rows import RowMismatch, infer_schema, parse_line
from msgstream.config import Config
from msgstream.schema import CollectionSchema

from ..schema_lookup import find_collection_schema
from .ingest import default_channels


def _rows(stream: TextIO) -> Iterator[dict[str, object]]:
    for line in stream:
        text = line.rstrip("\r\n")
        if text.strip():
            yield parse_line(text)


def _infer(source: str, collection: str, key: str | None) -> CollectionSchema:
    try:
        if source == "-":
            return infer_schema(_rows(sys.stdin), collection, key)
        with Path(source).expanduser().open(encoding="utf-8") as stream:
            return infer_schema(_rows(stream), collection, key)
    except OSError as exc:
        raise CliError(f"--infer: cannot read {source}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"--infer: {source} is not UTF-8 text: {exc}") from None
    except (RowMismatch, ValueError) as exc:
        raise CliError(f"--infer: {exc}") from None


async def handle(config: Config, args: argparse.Namespace) -> int:
    if args.infer is not None:
        if args.channels:
            raise CliError("--infer reads rows, not channels: drop --channel")
        # reading a file or stdin blocks: off the event loop
        schema = await asyncio.to_thread(
            _infer, args.infer, args.collection or "msgstream_cli", args.key
        )
    else:
        if args.key is not None:
            raise CliError("--key names the primary key of an inferred schema: add --infer")
        channels = args.channels or await default_channels(config)
        schema = await find_collection_schema(config, channels, args.collection)
    text = orjson.dumps(schema.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return EXIT_OK
    await asyncio.to_thread(_write, args.out, text)
    return EXIT_OK


def _write(path: str, text: str) -> None:
    try:
        Path(path).expanduser().write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"--out: cannot write {path}: {exc.strerror or exc}") from None
