"""The payloads of one read joined into one byte array, cut by numpy indexing.

A reader checks a batch of payloads column by column (:func:`msgstream.wire.codec.decode_batch`).
Slicing each payload for its envelope, its body or its row timestamps makes a bytes object
per payload and per part; gathering the same bytes from one joined array with a fancy
index makes none: one C-level copy per part for the whole batch. :class:`Joined` holds the
joined bytes and where each payload starts; its methods gather fixed-size parts (the
envelope, a body of a known length, a plan's row timestamps) of many payloads at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import envelope


class Joined:
    """``payloads`` joined (one copy), with each one's size and start."""

    __slots__ = ("data", "sizes", "starts")

    def __init__(self, payloads: Sequence[bytes], sizes: Any) -> None:
        self.data = np.frombuffer(b"".join(payloads), np.uint8)
        self.sizes = sizes
        """Each payload's length (int64)."""
        self.starts = np.cumsum(sizes) - sizes
        """Where each payload starts in :attr:`data`."""

    def envelopes(self) -> Any:
        """Every payload's envelope as a record array (:data:`msgstream.wire.envelope.DTYPE`);
        every payload must be at least an envelope long."""
        gathered = self._windows(envelope.SIZE)[self.starts]
        return gathered.view(envelope.DTYPE).reshape(len(self.starts))

    def parts(self, rows: Any, begin: int, length: int) -> Any:
        """Bytes ``begin:begin + length`` of the payloads at ``rows`` (indices), one row of
        the 2-D result per payload; each must hold them."""
        return self._windows(length)[self.starts[rows] + begin]

    def _windows(self, length: int) -> Any:
        """Every ``length`` bytes of :attr:`data` (a view of the read-only bytes, row ``i``
        starting at byte ``i``): indexing its rows copies whole parts, with an index per part, not
        per byte."""
        data = self.data
        return np.ndarray((max(len(data) - length + 1, 0), length), np.uint8, data, 0, (1, 1))
