"""Counting the garbage collector's runs during a call (tests that a path makes no
objects the collector tracks, object by object)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


def collections_during(call: Callable[[], _T]) -> tuple[_T, list[int]]:
    """``call()``'s result and the generation of each collection that ran during it,
    after a full collection beforehand."""
    started: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        return call(), started
    finally:
        gc.callbacks.remove(count)
