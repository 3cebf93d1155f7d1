"""Bounded reprs of untrusted values, for error messages.

Parsed JSON or YAML may nest a thousand levels deep (a plain ``repr`` then exceeds
Python's recursion limit and raises ``RecursionError`` instead of the intended error) or
be megabytes long. Short values print exactly as ``repr`` prints them.
"""

from __future__ import annotations

import itertools
import reprlib
from typing import Any


class _Brief(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxstring = 80
        self.maxother = 80

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        # reprlib sorts keys; a message should show them in the order they were given.
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        shown = [
            f"{self.repr1(key, level - 1)}: {self.repr1(value, level - 1)}"
            for key, value in itertools.islice(x.items(), self.maxdict)
        ]
        if len(x) > self.maxdict:
            shown.append("...")
        return "{" + ", ".join(shown) + "}"


_BRIEF = _Brief()


def brief(value: Any) -> str:
    """``repr(value)``, shortened beyond 3 levels of nesting, 80-character strings and
    a few dozen items per collection."""
    return _BRIEF.repr(value)
