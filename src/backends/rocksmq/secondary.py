"""The directory of a read-only store's RocksDB secondary instance, and the removal of
those their processes left behind.

A read-only store is a RocksDB *secondary* instance, which needs a directory of its own
(its info ``LOG`` goes there): a temporary one, removed when the store closes. A process
that dies without closing -- killed outright, out of memory, or a Spark worker stopped
mid-task (Spark's daemon kills those with SIGKILL) -- leaves its directory behind, and
one process per Spark task or query adds up.

So each directory holds a lock file, locked (``flock``) by the process that made it for
as long as its store is open. The kernel drops the lock when that process ends, however
it ends, and the first read-only open in every process removes the directories whose
lock it can take. A directory is made under a hidden name and given its public one only
once locked, so no other process ever sees it unlocked while its owner lives.
Directories without a lock file (made by earlier versions) are left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import threading
from pathlib import Path

PREFIX = "msgstream-secondary-"
"""The name every secondary directory starts with, under the temporary directory."""
LOCK = "owner.lock"

_swept: set[str] = set()
"""The temporary directories this process has swept already (once each: sweeping lists
the whole directory)."""
_sweeping = threading.Lock()


class SecondaryDir:
    """A new locked secondary directory: :attr:`name`; :meth:`cleanup` when the store is
    closed."""

    def __init__(self) -> None:
        root = tempfile.gettempdir()
        sweep(root)
        hidden = tempfile.mkdtemp(prefix=f".{PREFIX}", dir=root)
        self._lock = open(os.path.join(hidden, LOCK), "wb")  # noqa: SIM115 (held open)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.name = os.path.join(root, os.path.basename(hidden)[1:])
            os.rename(hidden, self.name)
        except BaseException:
            self._lock.close()
            shutil.rmtree(hidden, ignore_errors=True)
            raise

    def cleanup(self) -> None:
        shutil.rmtree(self.name, ignore_errors=True)
        self._lock.close()


def sweep(root: str) -> list[str]:
    """Remove the secondary directories under ``root`` whose owner is gone (their lock is
    free), once per process and ``root``; the names removed."""
    with _sweeping:
        if root in _swept:
            return []
        _swept.add(root)
    removed = []
    with contextlib.suppress(OSError):
        for entry in Path(root).iterdir():
            if entry.name.startswith(PREFIX) and _abandoned(entry):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry.name)
    return removed


def _abandoned(directory: Path) -> bool:
    """Whether ``directory``'s lock file exists and no process holds its lock."""
    try:
        with open(directory / LOCK, "rb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True  # the lock is dropped when the file closes
    except OSError:  # no lock file (an older version's, or not ours), or held: alive
        return False
