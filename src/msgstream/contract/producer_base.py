"""What every backend's producer shares: the channel it sends to, refusing to send once it
is closed, and refusing a payload over a size limit before anything is sent."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import MessageTooLargeError, StreamClosedError


class ProducerBase:
    """The checks common to every backend's producer."""

    def __init__(self, channel: str, *limits: int) -> None:
        self.channel = channel
        self._limits = limits
        """The sizes, in bytes, no payload may exceed: msgstream's own first (then a
        broker's, say)."""
        self._fits = min(limits, default=float("inf"))
        """A payload this size or smaller passes every limit."""
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StreamClosedError(f"producer of channel {self.channel!r}")

    def _check_sizes(self, payloads: Sequence[bytes]) -> int:
        """Refuse ``payloads`` if the largest is over a limit; the error names the first
        limit exceeded. Returns the largest size."""
        biggest = max(map(len, payloads), default=0)
        if biggest <= self._fits:
            return biggest
        for limit in self._limits:
            if biggest > limit:
                raise MessageTooLargeError(self.channel, biggest, limit)
        return biggest

    async def close(self) -> None:
        self._closed = True
