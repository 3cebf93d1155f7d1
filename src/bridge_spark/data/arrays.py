"""Arrow arrays from numpy arrays and lists of text, built from their buffers.

Both converters of the bridge build every column here, never with ``pa.array``, for two
reasons:

- ``pa.array`` imports pandas on its first call in a process (pyarrow's pandas shim
  looks for a Series), whatever it is given. A Spark Python worker converting rows
  would pay that import and the memory pandas holds, though nothing else in it uses
  pandas.
- ``pa.array(values, type=pa.int64(), mask=null)`` -- an int64 numpy array, its type
  given, a null mask -- converts row by row in pyarrow 26, making objects that set the
  garbage collector off, where a buffer is wrapped at once.

Numbers already of the Arrow type's own numpy type are wrapped without a copy (bools are
packed into bits, as Arrow keeps them); others are wrapped as their own type and go
through Arrow's safe cast, which refuses a value the target type cannot hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["numeric_array", "text_array", "wrapped"]

_OFFSET_LIMIT = 2**31 - 1
"""The most bytes an Arrow ``string`` array (32-bit offsets) holds."""


def numeric_array(
    values: npt.NDArray[Any], arrow_type: pa.DataType, null: npt.NDArray[np.bool_] | None
) -> pa.Array:
    """``values`` (one-dimensional) as an Arrow array of ``arrow_type`` whose rows are
    null where ``null`` is True."""
    validity = None
    null_count = 0 if null is None else int(np.count_nonzero(null))
    if null_count:
        assert null is not None
        validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
    if pa.types.is_boolean(arrow_type) and values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    elif not pa.types.is_boolean(arrow_type) and values.dtype == _numpy_type(arrow_type):
        data = pa.py_buffer(np.ascontiguousarray(values, values.dtype.newbyteorder("=")))
    else:  # another numpy type: as its own Arrow type, then Arrow's checked cast
        return numeric_array(values, pa.from_numpy_dtype(values.dtype), null).cast(arrow_type)
    return pa.Array.from_buffers(arrow_type, len(values), [validity, data], null_count=null_count)


def wrapped(values: npt.NDArray[Any]) -> pa.Array:
    """``values`` (one-dimensional, numbers or bools, no nulls) as the Arrow array of
    their own type."""
    return numeric_array(values, pa.from_numpy_dtype(values.dtype), None)


def text_array(values: Sequence[str]) -> pa.Array:
    """``values`` as an Arrow ``string`` array (UTF-8)."""
    encoded = [value.encode() for value in values]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    if offsets[-1] > _OFFSET_LIMIT:
        raise OverflowError(f"{offsets[-1]} bytes of text exceed an Arrow string array's")
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)


def _numpy_type(arrow_type: pa.DataType) -> np.dtype[Any]:
    numpy_type: np.dtype[Any] = np.dtype(arrow_type.to_pandas_dtype())
    return numpy_type.newbyteorder("=")
