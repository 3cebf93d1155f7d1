"""Kafka MessageIDs: the offset of a record in a channel's single partition."""

from __future__ import annotations

from functools import total_ordering

from msgstream.backend import TAGGED_ID_SIZE, message_id_bytes, tagged_id_owner
from msgstream.errors import ForeignMessageIdError, InvalidPositionError

TAG = b"k"
"""First byte of a serialised Kafka id; the embedded backends use b"m" and b"r"."""


@total_ordering
class KafkaMessageID:
    """An offset in a one-partition topic. Ids of other backends never compare equal, and
    ordering against one raises :class:`ForeignMessageIdError`."""

    __slots__ = ("offset",)
    backend = "kafka"

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def to_bytes(self) -> bytes:
        return TAG + self.offset.to_bytes(8, "big", signed=True)

    @classmethod
    def parse(cls, data: bytes) -> KafkaMessageID:
        """The id whose ``to_bytes()`` is ``data``; another backend's id is an error."""
        if len(data) == TAGGED_ID_SIZE and data[:1] == TAG:
            return cls(int.from_bytes(data[1:], "big", signed=True))
        owner = tagged_id_owner(data)
        if owner is not None:
            raise ForeignMessageIdError("kafka", owner)
        raise InvalidPositionError(f"{len(data)}-byte MessageID {data[:16]!r} is not a kafka id")

    @classmethod
    def of(cls, msg_id: object) -> KafkaMessageID:
        """``msg_id`` as a Kafka id, or a clear error when another backend made it."""
        if isinstance(msg_id, KafkaMessageID):
            return msg_id
        return cls.parse(message_id_bytes("kafka", msg_id))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KafkaMessageID):
            return self.offset == other.offset
        return NotImplemented

    def __hash__(self) -> int:
        return hash((TAG, self.offset))

    def __lt__(self, other: object) -> bool:
        return self.offset < KafkaMessageID.of(other).offset

    def __repr__(self) -> str:
        return f"KafkaMessageID({self.offset})"

    __str__ = __repr__
