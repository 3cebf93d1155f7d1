"""The rocksmq backend's part in ``msgstream bench``: its raw baseline, rocksdict ``put``.

The baseline writes the same encoded bytes straight into a RocksDB of its own (a sibling
directory of the store, so on the same disk), keyed as the store keys messages, with the
store's durability setting (``rocksmq.sync``); a pack of several messages is one
``WriteBatch``. It is removed when the run ends.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from msgstream.bench.targets import BenchPlugin, Target, package_version
from msgstream.configuration.config import Config
from msgstream.wire.codec import encode
from msgstream.wire.messages import TsMsg

from .settings import RocksmqConfig

_KEY = struct.Struct(">cIq").pack


class RawRocksdict(Target):
    label = "raw rocksdict"

    def __init__(self, config: Config) -> None:
        self.section = config.section(RocksmqConfig)
        self.channels: list[str] = []  # nothing on a broker to delete afterwards
        self.db: Rdict | None = None
        self.directory: str | None = None
        self.next_id: dict[int, int] = {}
        self.write_options = WriteOptions()
        self.write_options.sync = self.section.sync

    async def open(self, channels: Sequence[str]) -> None:
        store = Path(self.section.resolved_path())
        store.parent.mkdir(parents=True, exist_ok=True)
        self.directory = tempfile.mkdtemp(prefix=f"{store.name}-bench-raw-", dir=store.parent)
        self.db = Rdict(self.directory, Options(raw_mode=True))

    def prepare(self, channel: int, msgs: list[TsMsg]) -> Any:
        first = self.next_id.get(channel, 0)
        self.next_id[channel] = first + len(msgs)
        if len(msgs) == 1:
            return _KEY(b"M", channel, first), encode(msgs[0])
        batch = WriteBatch(raw_mode=True)
        for i, msg in enumerate(msgs):
            batch.put(_KEY(b"M", channel, first + i), encode(msg))
        return batch

    async def send(self, channel: int, prepared: Any) -> None:
        assert self.db is not None
        if isinstance(prepared, tuple):
            self.db.put(prepared[0], prepared[1], self.write_options)
        else:
            self.db.write(prepared, self.write_options)

    async def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def client(self) -> dict[str, Any]:
        return {
            "library": f"rocksdict {package_version('rocksdict')}",
            "settings": {"sync": self.section.sync, "write": "put / WriteBatch per pack"},
        }


async def broker_info(config: Config) -> dict[str, Any]:
    return {
        "broker": "embedded RocksDB (rocksdict)",
        "path": config.section(RocksmqConfig).resolved_path(),
    }


BENCH = BenchPlugin(raw_target=RawRocksdict, broker_info=broker_info)
