"""The driver-side batcher's checkpoint: one small JSON file, replaced atomically.

It records the last committed batch (its id and the positions after it) and, while a
batch is being processed, that batch as *pending*: its id and the time tick it ends at.
A batch is marked pending before the user function sees it and committed after it
returned, so a job that dies in between redoes exactly that batch, with the same id, on
restart. Writes go to a temporary file in the same directory, are fsynced and renamed
over the old file (and the directory fsynced): a crash leaves the old or the new
checkpoint, never a torn one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from msgstream.errors import InvalidPositionError
from msgstream.wire.position import MsgPosition

from ..errors import CheckpointError

FORMAT = "msgstream-spark-batcher"
VERSION = 1


@dataclass(frozen=True)
class BatchMark:
    """A batch boundary: the batch's id and where reading continues after it."""

    batch_id: int
    end_ts: int
    positions: tuple[MsgPosition, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "end_ts": self.end_ts,
            "positions": [p.to_dict() for p in self.positions],
        }

    @classmethod
    def from_dict(cls, data: Any, what: str) -> BatchMark:
        if not isinstance(data, dict):
            raise ValueError(f"{what} must be an object")
        batch_id, end_ts, positions = (
            data.get("batch_id"),
            data.get("end_ts"),
            data.get("positions"),
        )
        if not isinstance(batch_id, int) or isinstance(batch_id, bool) or batch_id < -1:
            raise ValueError(f"{what}.batch_id must be an int >= -1, got {batch_id!r}")
        if not isinstance(end_ts, int) or isinstance(end_ts, bool) or end_ts < 0:
            raise ValueError(f"{what}.end_ts must be an int >= 0, got {end_ts!r}")
        if not isinstance(positions, list):
            raise ValueError(f"{what}.positions must be a list")
        try:
            parsed = tuple(MsgPosition.from_dict(p) for p in positions)
        except InvalidPositionError as exc:
            raise ValueError(f"{what}.positions: {exc}") from None
        return cls(batch_id, end_ts, parsed)


@dataclass(frozen=True)
class CheckpointState:
    channels: tuple[str, ...]
    collection: str
    committed: BatchMark | None = None
    """The last committed boundary (``batch_id`` -1: positions advanced, no batch yet)."""
    pending: BatchMark | None = None
    """A batch handed to the user function and not yet committed."""

    @property
    def next_batch_id(self) -> int:
        if self.pending is not None:
            return self.pending.batch_id
        return 0 if self.committed is None else self.committed.batch_id + 1

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "format": FORMAT,
                "version": VERSION,
                "channels": list(self.channels),
                "collection": self.collection,
                "committed": None if self.committed is None else self.committed.to_dict(),
                "pending": None if self.pending is None else self.pending.to_dict(),
            },
            option=orjson.OPT_INDENT_2,
        )


def load_checkpoint(path: str | os.PathLike[str]) -> CheckpointState | None:
    """The checkpoint at ``path``, or None if there is none yet. Anything unreadable
    raises :class:`CheckpointError` naming the path."""
    where = os.fspath(path)
    try:
        raw = Path(where).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(where, f"cannot be read: {exc.strerror or exc}") from exc
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CheckpointError(where, f"is not valid JSON ({exc})") from None
    try:
        return _parse(data)
    except ValueError as exc:
        raise CheckpointError(where, str(exc)) from None


def _parse(data: Any) -> CheckpointState:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"is not a {FORMAT} checkpoint")
    if data.get("version") != VERSION:
        raise ValueError(f"has version {data.get('version')!r}; this bridge reads {VERSION}")
    channels, collection = data.get("channels"), data.get("collection")
    if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
        raise ValueError("'channels' must be a list of channel names")
    if not isinstance(collection, str):
        raise ValueError("'collection' must be a string")
    committed = data.get("committed")
    pending = data.get("pending")
    return CheckpointState(
        channels=tuple(channels),
        collection=collection,
        committed=None if committed is None else BatchMark.from_dict(committed, "committed"),
        pending=None if pending is None else BatchMark.from_dict(pending, "pending"),
    )


def save_checkpoint(path: str | os.PathLike[str], state: CheckpointState) -> None:
    """Replace the checkpoint at ``path`` atomically and durably."""
    target = Path(path)
    where = os.fspath(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(state.to_json())
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        _fsync_dir(target.parent)
    except OSError as exc:
        raise CheckpointError(where, f"cannot be written: {exc.strerror or exc}") from exc


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_matches(
    state: CheckpointState, path: str | os.PathLike[str], channels: Sequence[str], collection: str
) -> None:
    """Refuse a checkpoint written for other channels or another collection."""
    if list(state.channels) != list(channels):
        raise CheckpointError(
            os.fspath(path),
            f"was written for channels {list(state.channels)}, not {list(channels)}",
        )
    if state.collection != collection:
        raise CheckpointError(
            os.fspath(path),
            f"was written for collection {state.collection!r}, not {collection!r}",
        )
