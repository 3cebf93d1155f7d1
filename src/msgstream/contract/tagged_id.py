"""The MessageID of backends that number a channel's messages with an int64.

Memory, rocksmq and Kafka ids are one integer each: an id of the log, an offset. They
share this implementation; each backend subclasses it with its name and its tag byte.
Serialised, such an id is the tag and the integer as a signed big-endian int64 (9 bytes,
:data:`~msgstream.contract.backend.TAGGED_ID_SIZE`), so any backend can name the owner of a
foreign one (:func:`~msgstream.contract.backend.tagged_id_owner`).
"""

from __future__ import annotations

from typing import ClassVar, Self

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
