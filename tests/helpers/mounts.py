"""Small real filesystems for fault tests: a tmpfs of a few MiB fills up for real, and a
read-only one refuses writes for real (root ignores file permissions, a mount does not).

Mounting needs root (CI and the developer machines run as root). Elsewhere the tests that
need it skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers.fixtures import in_ci


@contextlib.contextmanager
def tmpfs(path: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        message = f"cannot mount a tmpfs at {path}: {done.stderr.strip() or done.returncode}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
