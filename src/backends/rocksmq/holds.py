"""Subscriptions held by processes that open the store read-only.

RocksDB lets one process write a store; every other process opens it read-only (a
secondary instance) and cannot write a subscription into it. Yet such a process may need
retention to keep what it has not consumed yet -- the Spark source's driver runs in
Spark's Python workers, next to the process that produces. It leaves a *hold* instead: a
small file under ``<store>/holds/`` naming a channel, a subscription and the next id it
needs. The writing process's retention honours holds as it does its own subscriptions
(including their idle expiry); deleting the hold releases what it kept.

A hold file is replaced atomically (write, fsync, rename), so a reader sees the old or
the new position, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

import orjson

from ..log_client.store import StoredSubscription, now_ms
from .errors import StoreError
from .failures import store_error

HOLDS_DIR = "holds"


class Holds:
    """The holds of the store at ``path`` (its directory)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.dir = os.path.join(path, HOLDS_DIR)

    def _file(self, channel: str, name: str) -> str:
        return os.path.join(self.dir, f"{channel.encode().hex()}.{name.encode().hex()}")

    def get(self, channel: str, name: str) -> StoredSubscription | None:
        try:
            with open(self._file(channel, name), "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise store_error(self.path, exc, f"reading hold {name!r} of {channel!r}") from exc
        return _parse(self.path, name, channel, data)

    def put(self, channel: str, name: str, next_id: int) -> None:
        """Hold ``channel`` from ``next_id`` on for subscription ``name``."""
        doing = f"saving hold {name!r} of channel {channel!r}"
        body = orjson.dumps({"next_id": next_id, "active_ms": now_ms()})
        try:
            os.makedirs(self.dir, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(body)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(temp, self._file(channel, name))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        except OSError as exc:
            raise store_error(self.path, exc, doing) from exc

    def delete(self, channel: str, name: str) -> bool:
        """Release the hold; whether there was one."""
        try:
            os.unlink(self._file(channel, name))
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise store_error(self.path, exc, f"deleting hold {name!r} of {channel!r}") from exc
        return True

    def of_channel(self, channel: str) -> list[StoredSubscription]:
        """The holds of ``channel``, by name."""
        prefix = f"{channel.encode().hex()}."
        try:
            entries = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise store_error(self.path, exc, f"listing the holds of {channel!r}") from exc
        held = []
        for entry in entries:
            if entry.startswith(prefix):
                name = bytes.fromhex(entry[len(prefix) :]).decode()
                sub = self.get(channel, name)
                if sub is not None:
                    held.append(sub)
        return held


def _parse(path: str, name: str, channel: str, data: bytes) -> StoredSubscription:
    try:
        fields = orjson.loads(data)
        return StoredSubscription(name, int(fields["next_id"]), int(fields["active_ms"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise StoreError(
            path, f"hold {name!r} of channel {channel!r} is not a hold file: {data[:80]!r}"
        ) from None
