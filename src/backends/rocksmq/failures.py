"""The one place that turns what RocksDB and the OS say about a store into msgstream errors.

rocksdict raises a bare ``Exception`` carrying RocksDB's status text, so the kind of
failure is read from that text, in this table's order (first match wins). Every error
names the store's path; none is RocksDB's raw text alone.
"""

from __future__ import annotations

import errno
import os

from .errors import (
    DiskFullError,
    StoreCorruptedError,
    StoreError,
    StoreLockedError,
    StorePathError,
)

_DOCTOR = "run `msgstream doctor {path}` to see what is damaged and what can be recovered"

_BY_TEXT: tuple[tuple[tuple[str, ...], type[StoreError], str], ...] = (
    (
        ("No space left on device", "NoSpace"),
        DiskFullError,
        "{doing} failed: the disk holding the store is full; nothing of this write was "
        "stored, and writes resume by themselves once space is freed",
    ),
    (
        ("While lock file", "lock hold by current process", "LOCK: Resource temporarily"),
        StoreLockedError,
        "another process holds the store open for writing without sharing it (an older "
        "msgstream, or RocksDB opened directly): stop that process, or open this one with "
        "`rocksmq.sharing: read_only` to only read",
    ),
    (
        ("Corruption",),
        StoreCorruptedError,
        "{doing} found damage: {text}; " + _DOCTOR,
    ),
    (
        ("Permission denied", "Read-only file system", "Operation not permitted"),
        StorePathError,
        "{doing} is not permitted: {text}",
    ),
)


def store_error(path: str, exc: BaseException, doing: str) -> StoreError:
    """The msgstream error for ``exc``, raised by RocksDB or the OS while ``doing``."""
    if isinstance(exc, StoreError):
        return exc
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        text = "No space left on device"
    for needles, kind, template in _BY_TEXT:
        if any(needle in text for needle in needles):
            return kind(path, template.format(doing=doing, text=text, path=path))
    if isinstance(exc, OSError):
        return StorePathError(path, f"{doing} failed: {text}")
    return StoreError(path, f"{doing} failed: {text}")


def check_store_path(path: str, *, create: bool) -> None:
    """Refuse a path that cannot hold a store, before RocksDB (or ``os.makedirs``) would
    fail on it with a bare OS error; create the directory when ``create``."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise StorePathError(
            path, "this is a file, not a directory (rocksmq.path names a directory)"
        )
    ancestor = os.path.dirname(path)
    while ancestor and not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if ancestor and not os.path.isdir(ancestor):
        raise StorePathError(path, f"{ancestor!r} is a file, so no directory can be made under it")
    if not create:
        if not os.path.isfile(os.path.join(path, "CURRENT")):
            raise StorePathError(
                path, "no rocksmq store here (nothing was created; check the path)"
            )
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise store_error(path, exc, "creating the store's directory") from exc
