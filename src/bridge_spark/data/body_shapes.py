"""JSON bodies read by their shape: one parse per shape, not one per message.

The Insert bodies of a batch are small JSON objects that differ from one another mostly
in their numbers: row counts, buffer offsets and sizes. A body's *shape* is its bytes with
every digit made ``0``. Two bodies of one shape hold the same bytes wherever the shape has
no digit, and digits in the same places. So once one body of a shape has been parsed and
found canonical (the bytes ``orjson`` writes for what it parsed), every other body of that
shape is the same document with other numbers in the same places -- given that

- the digits that are not a number's (inside a key or a string) are the same, and
- no number is written with a leading zero (``07`` is not JSON; a shape cannot tell).

:class:`BodyShape` learns from its first body where each number is and which value it is
(its path in the document). :meth:`BodyShape.fits` checks the first condition on each
body, in one C-level call; :meth:`BodyShape.numbers` reads the numbers of many bodies at
once with numpy, and checks the second. A body whose shape has not been learned, or one
that cannot be (not canonical, a float or negative number in it), is parsed as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

Path = tuple[str | int, ...]
"""Where a number is in a parsed body: keys and list indexes from the top."""

_DIGITS = re.compile(rb"[0-9]+")
_TEXT_DIGITS = re.compile(r"[0-9]+")
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
MAX_DIGITS = 18
"""Numbers of up to this many digits are read (they fit an int64); a longer one makes
:meth:`BodyShape.numbers` give up."""
_POWERS = [10 ** np.arange(n - 1, -1, -1, dtype=np.int64) for n in range(MAX_DIGITS + 1)]


def shape_of(body: bytes) -> bytes:
    """``body`` with every digit made ``0``: the key of its :class:`BodyShape`."""
    return body.translate(_ZERO_DIGITS)


class BodyShape:
    """Where the numbers of every body of one shape are (see the module's docstring)."""

    __slots__ = ("_numbers", "_text", "_text_of", "key", "size")

    def __init__(self, body: bytes, runs: list[tuple[int, int]], paths: list[Path | None]):
        self.key = shape_of(body)
        self.size = len(body)
        self._numbers = {
            path: (start, end - start)
            for (start, end), path in zip(runs, paths, strict=True)
            if path is not None
        }
        text = [
            slice(start, end)
            for (start, end), path in zip(runs, paths, strict=True)
            if path is None
        ]
        self._text_of: Callable[[bytes], Any] | None = itemgetter(*text) if text else None
        self._text = None if self._text_of is None else self._text_of(body)

    @classmethod
    def learn(cls, body: bytes, parsed: Any) -> BodyShape | None:
        """The shape of ``body``, which ``orjson`` parsed as ``parsed``; None unless
        ``body`` is canonical and its numbers are all non-negative integers."""
        if orjson.dumps(parsed) != body:
            return None
        paths: list[Path | None] = []
        if not _walk(parsed, (), paths):
            return None
        runs = [match.span() for match in _DIGITS.finditer(body)]
        if len(runs) != len(paths):
            return None
        return cls(body, runs, paths)

    def fits(self, body: bytes) -> bool:
        """Whether ``body``, of this shape, has the same digits inside keys and strings."""
        return self._text_of is None or self._text_of(body) == self._text

    def number(self, body: bytes, path: Path) -> int:
        """The number at ``path`` of one body of this shape (leading zeros not checked)."""
        start, length = self._numbers[path]
        return int(body[start : start + length])

    def numbers(self, bodies: bytes, count: int) -> dict[Path, npt.NDArray[np.int64]] | None:
        """Every number of ``count`` bodies of this shape, joined as ``bodies``, by path;
        None if one is written with a leading zero or has more than :data:`MAX_DIGITS`
        digits (then those bodies are not what their shape says: parse them)."""
        grid = np.frombuffer(bodies, np.uint8).reshape(count, self.size)
        found: dict[Path, npt.NDArray[np.int64]] = {}
        for path, (start, length) in self._numbers.items():
            if length > MAX_DIGITS:
                return None
            digits = grid[:, start : start + length].astype(np.int64) - ord("0")
            if length > 1 and not digits[:, 0].all():
                return None
            found[path] = digits @ _POWERS[length]
        return found


def _walk(value: Any, path: Path, out: list[Path | None]) -> bool:
    """Append, in the order ``orjson`` writes ``value``, one entry per run of digits: the
    path of a number, None for digits inside a key or a string. False for a float or a
    negative number (their digits are not one run of a number)."""
    if type(value) is dict:
        for key, item in value.items():
            out.extend([None] * len(_TEXT_DIGITS.findall(key)))
            if not _walk(item, (*path, key), out):
                return False
    elif type(value) is list:
        for index, item in enumerate(value):
            if not _walk(item, (*path, index), out):
                return False
    elif type(value) is str:
        out.extend([None] * len(_TEXT_DIGITS.findall(value)))
    elif type(value) is int:
        if value < 0:
            return False
        out.append(path)
    elif value is not None and type(value) is not bool:
        return False  # a float
    return True
