"""Functions written as Python source at run time and compiled, as :mod:`dataclasses`
writes ``__init__``: the per-message code of the wire format (:mod:`msgstream.wire.bodies`,
:mod:`msgstream.wire.batch_encoder`), where walking a declaration on every message would
cost a noticeable share of a small message. Their source is kept for :func:`source` and
for tracebacks."""

from __future__ import annotations

import linecache
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from typing import Any

_SOURCES: weakref.WeakKeyDictionary[Callable[..., Any], str] = weakref.WeakKeyDictionary()
"""Each generated function's source, for as long as the function lives (the batch
encoder drops the ones of shapes it no longer keeps)."""
_serial = count()


class Source:
    """Python source built line by line, indented by :meth:`block`."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._depth = 0

    def line(self, text: str) -> None:
        self.lines.append("    " * self._depth + text)

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        self.line(head)
        self._depth += 1
        yield
        self._depth -= 1

    def compile(self, name: str, scope: dict[str, Any]) -> Callable[..., Any]:
        """The function ``name`` this source defines, its names looked up in ``scope``;
        its lines show in tracebacks."""
        text = "\n".join(self.lines) + "\n"
        filename = f"<msgstream.wire {name} #{next(_serial)}>"
        namespace = dict(scope)
        exec(compile(text, filename, "exec"), namespace)
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        made: Callable[..., Any] = namespace[name]
        _SOURCES[made] = text
        # A function dropped (an encoder of a shape no longer kept) takes its lines along.
        weakref.finalize(made, linecache.cache.pop, filename, None)
        return made


def source(function: Callable[..., Any]) -> str:
    """The source of a function generated here."""
    return _SOURCES[function]
