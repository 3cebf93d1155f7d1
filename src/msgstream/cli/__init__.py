"""The ``msgstream`` command line: produce, consume and inspect, plus the commands other
packages add through the ``msgstream.commands`` entry points (:mod:`.command`).

Run ``msgstream --help``. The entry point is :func:`msgstream.cli.main.main`, which takes
an argument list and returns the process exit code (0 ok, 1 failed check, 2 usage or
configuration error, 130 interrupted).
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
