"""The Insert and Delete rows of one batch, on the fastest way each can take.

Both readers of the bridge (a Spark task reading a slice, the driver-side micro-batcher)
collect the DML messages of a batch and then want one Arrow table. A :class:`DmlRows`
offers each Insert payload to :class:`~bridge_spark.data.columnar.InsertColumns` (whole-batch
passes, no object per message) and decodes everything else -- Deletes, payloads the
columnar path refuses, and every payload of a batch it refuses as a whole -- into a
:class:`~bridge_spark.data.convert.FrameBuilder`. A payload that does not decode is handed to
``on_bad`` and skipped; a message that does not fit the frame raises
:class:`~bridge_spark.errors.SchemaMismatchError`, as ``FrameBuilder.add`` does.

Rows come out as ``FrameBuilder`` builds them, the columnar Inserts first: inserts, then
deletes, but inserts taken on the two ways are not interleaved by message (sort by
``_ts`` for time order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import pyarrow as pa

from msgstream.errors import CodecError
from msgstream.observability.logs import get_logger
from msgstream.wire.messages import TsMsg

from .columnar import BatchRefused, InsertColumns
from .convert import FrameBuilder
from .frames import FrameSchema

log = get_logger(__name__)

Item = TypeVar("Item")
"""What the caller knows a message by: a raw consumed message, or a consumed one."""


class DmlRows(Generic[Item]):
    """Collects one batch's DML rows of ``frame``; ``decode`` makes an item's message in
    full (raising :class:`~msgstream.errors.CodecError` for a bad one), ``on_bad`` is told
    of each item skipped as bad."""

    def __init__(
        self,
        frame: FrameSchema,
        decode: Callable[[Item], TsMsg],
        on_bad: Callable[[Item, CodecError], None],
    ) -> None:
        self.columns = InsertColumns(frame)
        self.builder = FrameBuilder(frame)
        self._decode = decode
        self._on_bad = on_bad
        self._held: list[Item] = []
        """The items the columns hold, to decode if refused ..."""
        self._held_channels: list[str] = []
        """... and their channels (two lists: no tuple per message kept alive)."""

    @property
    def rows(self) -> int:
        """Rows collected (a batch the columnar path refuses may lose bad ones)."""
        return self.columns.rows + self.builder.rows

    @property
    def insert_rows(self) -> int:
        return self.columns.rows + self.builder.insert_rows

    @property
    def delete_rows(self) -> int:
        return self.builder.delete_rows

    def add_payload(
        self, item: Item, payload: bytes, channel: str, *, checksum_verified: bool = False
    ) -> None:
        """Add the message ``item`` whose payload is ``payload``, read from ``channel``
        (``checksum_verified``: by a stream's reader)."""
        if self.columns.offer(payload, channel, checksum_verified=checksum_verified):
            self._held.append(item)
            self._held_channels.append(channel)
        else:
            self._add_decoded(item, channel)

    def add_message(self, msg: TsMsg, channel: str) -> None:
        """Add a message decoded already."""
        self.builder.add(msg, channel)

    def _add_decoded(self, item: Item, channel: str) -> None:
        try:
            msg = self._decode(item)
        except CodecError as exc:
            self._on_bad(item, exc)
            return
        self.builder.add(msg, channel)

    def build(self) -> pa.Table:
        """Every row collected as one table; the counts then say what it holds."""
        tables = []
        if self.columns.rows:
            try:
                tables.append(self.columns.build())
            except BatchRefused as exc:
                log.debug("decoding %d messages one by one (%s)", len(self._held), exc)
                self.columns.clear()
                for item, channel in zip(self._held, self._held_channels, strict=True):
                    self._add_decoded(item, channel)
                self._held.clear()
                self._held_channels.clear()
        if self.builder.rows or not tables:
            tables.append(self.builder.build())
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def clear(self) -> None:
        self.columns.clear()
        self.builder.clear()
        self._held.clear()
        self._held_channels.clear()
