"""Kafka MessageIDs: the offset of a record in a channel's single partition."""

from __future__ import annotations

from msgstream.contract.tagged_id import TaggedMessageID


class KafkaMessageID(TaggedMessageID):
    """An offset in a one-partition topic (see :class:`~msgstream.contract.backend.MessageID` for
    equality and order); serialised with the tag b"k"."""

    __slots__ = ()
    backend = "kafka"
    tag = b"k"

    @property
    def offset(self) -> int:
        return self.value
