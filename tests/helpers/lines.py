"""A child process's output read line by line while it runs, so a test can wait for the
line that says the child got somewhere (instead of sleeping and hoping it did)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import IO

WAIT_S = 120.0
"""How long a line may take: a process starting on a loaded machine (the interpreter,
the imports) can take tens of seconds; a line that never comes still fails the test."""


class Lines:
    """The lines of ``stream`` (a text pipe), read on a thread as they come."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        """Every line taken so far (by :meth:`wait_for` and :meth:`rest`)."""
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, wanted: Callable[[str], bool], timeout: float = WAIT_S) -> str:
        """The first line from here on for which ``wanted`` is true; fails the test if the
        stream ends or ``timeout`` seconds pass without one."""
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"no such line within {timeout} s; lines so far:\n" + "\n".join(self.seen)
                ) from None
            if line is None:
                self._queue.put(None)
                raise AssertionError("the stream ended first; its lines:\n" + "\n".join(self.seen))
            self.seen.append(line)
            if wanted(line):
                return line

    def rest(self, timeout: float = WAIT_S) -> str:
        """Every line up to the end of the stream (the process has exited or is exiting),
        with those taken before, as one text."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the stream did not end within {timeout} s"
        while (line := self._queue.get_nowait()) is not None:
            self.seen.append(line)
        self._queue.put(None)
        return "".join(line + "\n" for line in self.seen)
