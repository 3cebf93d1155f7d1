"""Side buffers of a message body: numeric columns travel as raw little-endian bytes.

A body is a JSON document plus a byte area; the JSON refers to slices of that area as
``{"o": offset, "n": nbytes}``. Writers append, readers slice without copying.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import DecodeError


class BodyWriter:
    __slots__ = ("_chunks", "_size")

    def __init__(self) -> None:
        self._chunks: list[bytes | memoryview] = []
        self._size = 0

    def add_bytes(self, data: bytes | memoryview) -> dict[str, int]:
        ref = {"o": self._size, "n": len(data)}
        self._chunks.append(data)
        self._size += len(data)
        return ref

    def add_array(
        self, array: npt.NDArray[Any], dtype: str, items: int | None = None
    ) -> dict[str, int]:
        """Append ``array`` as contiguous little-endian ``dtype`` bytes.

        ``items`` is the array's size when the caller knows it already. Every attribute
        read of a numpy array costs a little, and a one-row message is a few of them.
        """
        target = _DTYPES.get(dtype) or _dtype(dtype)
        given = array.dtype
        if given is not target and given != target:
            array = np.ascontiguousarray(array, dtype=target)
            items = None
        if (array.size if items is None else items) < 64:
            data: bytes | memoryview = array.tobytes()  # C order, whatever the layout
        elif array.flags.c_contiguous:
            data = array.data.cast("B")  # large: referenced until the payload is joined
        else:
            data = array.tobytes()
        size = self._size
        self._chunks.append(data)
        self._size = size + len(data)
        return {"o": size, "n": len(data)}

    @property
    def size(self) -> int:
        return self._size

    def chunks(self) -> list[bytes | memoryview]:
        return self._chunks


_DTYPES: dict[str, np.dtype[Any]] = {}


def _dtype(name: str) -> np.dtype[Any]:
    item = _DTYPES.get(name)
    if item is None:
        item = _DTYPES[name] = np.dtype(name)
    return item


class BodyReader:
    """Reads the side buffers of one payload: ``data[base:]`` is the buffer area."""

    __slots__ = ("_base", "_data", "_size", "_where")

    def __init__(self, data: bytes, base: int, where: str) -> None:
        self._data = data
        self._base = base
        self._size = len(data) - base
        self._where = where

    def _slice(self, ref: Any) -> memoryview:
        if not isinstance(ref, dict):
            raise DecodeError(f"{self._where}: buffer reference must be an object, got {ref!r}")
        offset, nbytes = ref.get("o"), ref.get("n")
        if not isinstance(offset, int) or not isinstance(nbytes, int) or offset < 0 or nbytes < 0:
            raise DecodeError(f"{self._where}: malformed buffer reference {ref!r}")
        if offset + nbytes > self._size:
            raise DecodeError(
                f"{self._where}: buffer [{offset}, {offset + nbytes}) lies past the end of the "
                f"{self._size}-byte body (truncated payload)"
            )
        start = self._base + offset
        return memoryview(self._data)[start : start + nbytes]

    def get_bytes(self, ref: Any) -> bytes:
        return bytes(self._slice(ref))

    def get_view(self, ref: Any) -> memoryview:
        """The referenced bytes, not copied."""
        return self._slice(ref)

    def get_array(self, ref: Any, dtype: str, count: int) -> npt.NDArray[Any]:
        """Read ``count`` items of ``dtype`` (no copy; the result is read-only)."""
        item = _dtype(dtype)
        offset = ref.get("o") if type(ref) is dict else None
        nbytes = ref.get("n") if type(ref) is dict else None
        if (
            type(offset) is int
            and type(nbytes) is int
            and type(count) is int
            and offset >= 0
            and 0 < nbytes == count * item.itemsize
            and offset + nbytes <= self._size
        ):  # the common, valid case, checked without building views
            return np.ndarray((count,), item, self._data, self._base + offset)
        view = self._slice(ref)
        if len(view) != count * item.itemsize:
            raise DecodeError(
                f"{self._where}: buffer holds {len(view)} bytes, expected {count} x "
                f"{item.itemsize} for dtype {dtype}"
            )
        return np.frombuffer(view, dtype=item, count=count)
