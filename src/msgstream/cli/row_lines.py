"""Rows from lines of text, and what becomes of a line that does not give one.

Every command that takes rows (``msgstream produce`` from stdin, ``msgstream schema
--infer`` from a file or stdin) reads them here: one JSON object per line (or, with
``produce --text``, each line as the string field ``text``). Blank lines carry no row and
are skipped silently; they still count in the line numbers.

A bad line -- not UTF-8, not JSON, JSON but not an object, or a row the command cannot
use (it does not fit the collection schema, it lacks the ``--key`` field) -- is an
:class:`InvalidLineError` naming the source, the line and, where known, the column. By
default the first one stops the command (exit 2) and nothing of it is used; with
``--skip-invalid`` (:class:`BadLines`) each one is skipped, counted and named, and the
command exits 1 when it skipped any.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from .common import EXIT_FAILED, EXIT_OK, CliError, add_flag, stderr_console

SHOWN_SKIPS = 10
"""Skipped lines named one by one (on stderr, in summaries); the rest are counted."""

TEXT_FIELD = "text"
"""The field a line becomes with ``--text``."""


@dataclass(frozen=True)
class LineAt:
    """Where a line is: its source (``stdin`` or a file's path) and its number (from 1)."""

    source: str
    number: int

    def __str__(self) -> str:
        return f"{self.source} line {self.number}"


class InvalidLineError(CliError):
    """A line that gives no usable row: ``at`` names it, ``column`` (from 1) says where in
    it when known, ``problem`` says what is wrong."""

    def __init__(
        self, at: LineAt, problem: str, column: int | None = None, *, outcome: str = ""
    ) -> None:
        place = str(at) if column is None else f"{at}, column {column}"
        super().__init__(f"{place}: {problem}" + (f" ({outcome})" if outcome else ""))
        self.at = at
        self.problem = problem
        self.column = column
        self.outcome = outcome

    def with_outcome(self, outcome: str) -> InvalidLineError:
        """The same error, saying what the command did before it stopped here."""
        return InvalidLineError(self.at, self.problem, self.column, outcome=outcome)


_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def parse_row(line: str | bytes, at: LineAt, *, as_text: bool = False) -> dict[str, Any] | None:
    """The row of one line (its line ending is ignored): a JSON object, or with
    ``as_text`` ``{"text": line}``; None for a blank line. :class:`InvalidLineError`
    for a line that is not UTF-8, not JSON or not an object."""
    text = _utf8(line.rstrip(b"\r\n"), at) if isinstance(line, bytes) else line.rstrip("\r\n")
    if not text.strip():
        return None
    if as_text:
        return {TEXT_FIELD: text}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidLineError(at, f"invalid JSON: {exc.msg}", exc.colno) from None
    if not isinstance(value, dict):
        kind = "null" if value is None else _KINDS.get(type(value), type(value).__name__)
        column = len(text) - len(text.lstrip()) + 1
        raise InvalidLineError(at, f"expected a JSON object (one row per line), got {kind}", column)
    return value


def _utf8(data: bytes, at: LineAt) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        column = len(data[: exc.start].decode("utf-8")) + 1
        raise InvalidLineError(
            at, f"not UTF-8 text: byte 0x{data[exc.start]:02x} cannot start a character", column
        ) from None


class BadLines:
    """What becomes of bad lines: the first one stops the command (the default), or each
    is skipped, counted and, the first :data:`SHOWN_SKIPS` of them, named on stderr
    (``skip``: ``--skip-invalid``)."""

    def __init__(self, skip: bool) -> None:
        self.skip = skip
        self.count = 0
        self.shown: list[int] = []
        """The numbers of the first :data:`SHOWN_SKIPS` lines skipped."""

    def reject(self, error: InvalidLineError) -> None:
        """Stop at ``error`` (raise it), or skip its line."""
        if not self.skip:
            raise error
        self.count += 1
        if len(self.shown) < SHOWN_SKIPS:
            self.shown.append(error.at.number)
            stderr_console().print(f"warning: skipped {error}", markup=False)
            if len(self.shown) == SHOWN_SKIPS:
                stderr_console().print(
                    "warning: further lines skipped are counted, not shown", markup=False
                )

    def summary(self) -> str:
        """``skipped=N (lines 2, 5, ...)`` (empty when nothing was skipped)."""
        if not self.count:
            return ""
        more = ", ..." if self.count > len(self.shown) else ""
        lines = "line" if self.count == 1 else "lines"
        return f"skipped={self.count} ({lines} {', '.join(map(str, self.shown))}{more})"

    @property
    def exit_code(self) -> int:
        """1 when a line was skipped: the input was not all used."""
        return EXIT_FAILED if self.count else EXIT_OK


def stdin_lines() -> Iterable[str | bytes]:
    """The lines of stdin, as bytes where it has them: each line is then decoded on its
    own, so one that is not UTF-8 is named (and can be skipped) instead of failing the
    read of every line after it."""
    stream: Iterable[str | bytes] = getattr(sys.stdin, "buffer", sys.stdin)
    return stream


class RowLines:
    """The rows of one source's lines, numbered from 1 across calls of :meth:`rows` (a
    stream read in batches); bad lines go to ``bad``."""

    def __init__(self, source: str, bad: BadLines, *, as_text: bool = False) -> None:
        self.source = source
        self.bad = bad
        self.as_text = as_text
        self.lines_read = 0

    def rows(self, lines: Iterable[str | bytes]) -> Iterator[tuple[LineAt, dict[str, Any]]]:
        """``(where, row)`` of each line that gives one."""
        for line in lines:
            self.lines_read += 1
            at = LineAt(self.source, self.lines_read)
            try:
                row = parse_row(line, at, as_text=self.as_text)
            except InvalidLineError as exc:
                self.bad.reject(exc)
                continue
            if row is not None:
                yield at, row


def add_skip_invalid_option(parser: argparse.ArgumentParser) -> None:
    """``--skip-invalid``, with the same meaning for every command that takes rows."""
    add_flag(
        parser,
        "--skip-invalid",
        "skip lines that are not JSON objects or do not fit (counted and named, the first "
        f"{SHOWN_SKIPS}; exit 1 if any) instead of stopping at the first one (exit 2)",
    )
