"""The MessageID of backends that number a channel's messages with an int64.

Memory, rocksmq and Kafka ids are one integer each: an id of the log, an offset. They
share this implementation; each backend subclasses it with its name and its tag byte.
Serialised, such an id is the tag and the integer as a signed big-endian int64 (9 bytes,
:data:`~msgstream.contract.backend.TAGGED_ID_SIZE`), so any backend can name the owner of a
foreign one (:func:`~msgstream.contract.backend.tagged_id_owner`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Self, overload

from ..errors import ForeignMessageIdError, InvalidPositionError
from .backend import TAGGED_ID_SIZE, MessageID, tagged_id_owner


class TaggedMessageID(MessageID):
    """An int64 ``value`` within one channel; ``tag`` names the backend in the bytes."""

    __slots__ = ("value",)
    tag: ClassVar[bytes]

    def __init__(self, value: int) -> None:
        self.value = value

    @property
    def sort_key(self) -> int:
        return self.value

    def __int__(self) -> int:
        return self.value

    def to_bytes(self) -> bytes:
        return self.tag + self.value.to_bytes(8, "big", signed=True)

    @classmethod
    def parse(cls, data: bytes) -> Self:
        if len(data) == TAGGED_ID_SIZE and data[:1] == cls.tag:
            return cls(int.from_bytes(data[1:], "big", signed=True))
        owner = tagged_id_owner(data)
        if owner is not None:
            raise ForeignMessageIdError(cls.backend, owner)
        raise InvalidPositionError(
            f"{len(data)}-byte MessageID {data[:16]!r} is not a {cls.backend} MessageID"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value})"

    __str__ = __repr__


class MessageIdRange(Sequence[MessageID]):
    """The ids of messages one send stored one after another in one channel: what
    ``send_many`` returns on a backend that numbers a channel's messages consecutively.

    Each id is built when it is read, so a send of thousands of messages makes no
    thousand id objects unless the caller asks for them. It is a read-only sequence:
    indexing, slicing, iteration, ``len``, ``in``, and equality with any sequence of the
    same ids (a list of them included); ``+`` makes a list."""

    __slots__ = ("id_type", "values")

    def __init__(self, id_type: type[TaggedMessageID], values: range) -> None:
        self.id_type = id_type
        self.values = values
        """The ids' integer values."""

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> MessageID: ...

    @overload
    def __getitem__(self, index: slice) -> MessageIdRange: ...

    def __getitem__(self, index: int | slice) -> MessageID | MessageIdRange:
        if isinstance(index, slice):
            return MessageIdRange(self.id_type, self.values[index])
        return self.id_type(self.values[index])

    def __iter__(self) -> Iterator[MessageID]:
        return map(self.id_type, self.values)

    def __reversed__(self) -> Iterator[MessageID]:
        return map(self.id_type, reversed(self.values))

    def __contains__(self, item: object) -> bool:
        return isinstance(item, self.id_type) and item.value in self.values

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageIdRange):
            return self.id_type is other.id_type and self.values == other.values
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which do not hash

    def __add__(self, other: object) -> list[MessageID]:
        """``ids + more``: a list of both, as with two lists."""
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return [*self, *other]

    def __radd__(self, other: object) -> list[MessageID]:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return [*other, *self]

    def __reduce__(self) -> tuple[Any, ...]:
        return MessageIdRange, (self.id_type, self.values)

    def __repr__(self) -> str:
        if len(self.values) <= 4:
            return repr(list(self))
        return f"[{self[0]!r}, ... {self[-1]!r}] ({len(self.values)} ids)"


def tagged_ids(id_type: type[TaggedMessageID], values: Sequence[int]) -> Sequence[MessageID]:
    """``values`` as ids of ``id_type``: a :class:`MessageIdRange` when they count up one
    by one (a batch that no other sender's records interleaved), else a list."""
    if values:
        run = range(values[0], values[0] + len(values))
        if (values if isinstance(values, list) else list(values)) == list(run):
            return MessageIdRange(id_type, run)
    return list(map(id_type, values))
