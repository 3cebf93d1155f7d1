"""The Pulsar C++ client's log lines, carried into Python logging without the library ever
calling into Python.

pulsar-client can log through a ``logging.Logger``, but then each library thread holds a
Python object and takes the GIL to log and to let go of it. The client's threads outlive
``close()``: the thread that shuts a client down ends after the close has been reported.
When it ends while the interpreter is finalizing, Python ends it inside its C++ destructor
(``pthread_exit`` from the GIL wait) and the process aborts ("terminate called without an
active exception", or a segmentation fault), after a program has done all its work
(pulsar-client-python issue 256; about one exit in thirty here).

So the library gets its own file logger, writing into a pipe, and a daemon thread of this
module reads the pipe and logs each line to ``msgstream.backends.pulsar.library``. The
library keeps the logger of the first client a process makes (it is process-wide), so the
pipe is made once and lives as long as the process; its level is the effective level of
``msgstream.backends.pulsar.library`` when the first client is made.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any

from msgstream.observability.logs import fields, get_logger

from .library import pulsar

__all__ = ["LIBRARY_LOG", "library_logger"]

LIBRARY_LOG = get_logger("msgstream.backends.pulsar.library")
"""Where the library's lines go. ERROR and above unless configured: the library logs every
reconnection attempt, and msgstream reports failures as typed errors."""
if LIBRARY_LOG.level == logging.NOTSET:
    LIBRARY_LOG.setLevel(logging.ERROR)

_LINE = re.compile(rb"^\S+ \S+ (DEBUG|INFO|WARN|ERROR) +\[[^\]]*\] (.*)$", re.DOTALL)
"""The library's line: date, time, level, [thread id], ``Source:line | message``."""
_LEVELS = {
    b"DEBUG": logging.DEBUG,
    b"INFO": logging.INFO,
    b"WARN": logging.WARNING,
    b"ERROR": logging.ERROR,
}
_EXTRA = fields(backend="pulsar")


def _library_level(level: int) -> Any:
    """The ``pulsar.LoggerLevel`` that lets through what a Python logger at ``level`` logs."""
    if level <= logging.DEBUG:
        return pulsar.LoggerLevel.Debug
    if level <= logging.INFO:
        return pulsar.LoggerLevel.Info
    if level <= logging.WARNING:
        return pulsar.LoggerLevel.Warn
    return pulsar.LoggerLevel.Error


def forward(line: bytes, level: int) -> int:
    """Log one line of the library; returns its level (a line without one, the rest of a
    message that spans lines, keeps the level of the line before)."""
    match = _LINE.match(line)
    if match is not None:
        level = _LEVELS[match.group(1)]
        line = match.group(2)
    LIBRARY_LOG.log(level, "%s", line.decode("utf-8", "replace").rstrip("\n"), extra=_EXTRA)
    return level


def _drain(read_fd: int) -> None:
    """The reader thread: every line of the pipe to the logger, for the process's life."""
    level = logging.ERROR
    with open(read_fd, "rb", closefd=False) as pipe:
        for line in pipe:
            try:
                level = forward(line, level)
            except Exception:  # a failing handler must not stop the pipe from draining
                level = logging.ERROR


class _Pipe:
    """The pipe the library writes into, and the thread that drains it."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.path = f"/dev/fd/{self.write_fd}"
        self.start_reader()

    def start_reader(self) -> None:
        name = "msgstream-pulsar-library-log"
        threading.Thread(target=_drain, args=(self.read_fd,), name=name, daemon=True).start()


_pipe: _Pipe | None = None
_lock = threading.Lock()


def _restart_reader_in_child() -> None:
    """A forked child inherits the pipe (the library's logger writes into it) but not the
    reader thread: start one, so the child's library never blocks on a full pipe."""
    if _pipe is not None:
        _pipe.start_reader()


os.register_at_fork(after_in_child=_restart_reader_in_child)


def library_logger() -> Any:
    """The ``logger`` argument of ``pulsar.Client``: the pipe's native file logger, or the
    library's stdout logger where the system has no ``/dev/fd``."""
    global _pipe
    level = _library_level(LIBRARY_LOG.getEffectiveLevel())
    if not os.path.isdir("/dev/fd"):
        return pulsar.ConsoleLogger(level)
    with _lock:
        if _pipe is None:
            _pipe = _Pipe()
    return pulsar.FileLogger(level, _pipe.path)
