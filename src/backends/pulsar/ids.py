"""Pulsar MessageIDs: (ledger, entry, batch index), serialised by Pulsar itself.

``to_bytes()`` is ``MessageId.serialize()`` (the ``MessageIdData`` protobuf every Pulsar
client reads), so a position saved by msgstream can be used by any Pulsar tool and back.
Ids are compared by (ledger, entry, batch index): the order of the messages in a
non-partitioned topic. The partition (always -1 here) and batch size do not take part.
"""

from __future__ import annotations

from typing import Any, Self

from msgstream.contract.backend import MessageID, tagged_id_owner
from msgstream.errors import ForeignMessageIdError, InvalidPositionError

from .library import _pulsar

_LEDGER_FIELD_TAG = 0x08
"""A serialised MessageIdData starts with its required field 1 (ledgerId, varint)."""


class PulsarMessageID(MessageID):
    """A message's place in a non-partitioned topic (see
    :class:`~msgstream.contract.backend.MessageID` for equality and order)."""

    __slots__ = ("_native", "batch", "entry", "ledger")
    backend = "pulsar"

    def __init__(self, ledger: int, entry: int, batch: int = -1, native: Any = None) -> None:
        self.ledger = ledger
        self.entry = entry
        self.batch = batch
        self._native = native
        """The ``_pulsar.MessageId`` this id came from (kept: it serialises itself)."""

    @classmethod
    def from_native(cls, native: Any) -> Self:
        """Wrap a ``_pulsar.MessageId`` (or ``pulsar.MessageId``) as returned by the client."""
        return cls(native.ledger_id(), native.entry_id(), native.batch_index(), native)

    @property
    def sort_key(self) -> tuple[int, int, int]:
        return (self.ledger, self.entry, self.batch)

    def native(self) -> Any:
        """The ``_pulsar.MessageId`` of this id (partition -1: a non-partitioned topic)."""
        if self._native is None:
            self._native = _pulsar.MessageId(-1, self.ledger, self.entry, self.batch)
        return self._native

    def to_bytes(self) -> bytes:
        data: bytes = self.native().serialize()
        return data

    @classmethod
    def parse(cls, data: bytes) -> Self:
        """The id whose ``to_bytes()`` is ``data``; another backend's id is an error."""
        owner = tagged_id_owner(data)
        if owner is not None:
            raise ForeignMessageIdError("pulsar", owner)
        # Checked first so that obvious garbage never reaches the protobuf parser, which
        # logs every failure to stderr.
        if len(data) < 2 or data[0] != _LEDGER_FIELD_TAG:
            raise _not_an_id(data)
        try:
            native = _pulsar.MessageId.deserialize(data)
        except (ValueError, RuntimeError):
            raise _not_an_id(data) from None
        return cls.from_native(native)

    def __repr__(self) -> str:
        return f"PulsarMessageID({self.ledger}:{self.entry}:{self.batch})"

    __str__ = __repr__


EARLIEST = PulsarMessageID(-1, -1, -1)
"""Sorts before every message; seeking to it starts at the first message still stored."""


def _not_an_id(data: bytes) -> InvalidPositionError:
    return InvalidPositionError(f"{len(data)}-byte MessageID {data[:16]!r} is not a pulsar id")
