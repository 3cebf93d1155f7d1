"""Fixed-width Arrow columns from numpy arrays, nulls included, without a per-row path.

``pa.array(values, type=pa.int64(), mask=null)`` -- an int64 numpy array, its type given,
a null mask -- converts row by row in pyarrow 26, making objects that set the garbage
collector off, where every other width, or the same call without a mask, wraps the numpy
buffer at once. Both converters of the bridge build their numeric columns here, from
buffers.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["numeric_array"]


def numeric_array(
    values: npt.NDArray[np.generic], arrow_type: pa.DataType, null: npt.NDArray[np.bool_] | None
) -> pa.Array:
    """``values`` as an Arrow array of ``arrow_type`` whose rows are null where ``null``
    is True. Values already of the type's own numpy type are wrapped; any other (a bool,
    which Arrow packs in bits, or a type to convert) go through pyarrow's conversion."""
    if null is None or not null.any():
        return pa.array(values, type=arrow_type)
    if pa.types.is_boolean(arrow_type) or values.dtype != _numpy_type(arrow_type):
        return pa.array(values, type=arrow_type, mask=null)
    validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
    data = pa.py_buffer(np.ascontiguousarray(values))
    return pa.Array.from_buffers(
        arrow_type, len(values), [validity, data], null_count=int(np.count_nonzero(null))
    )


def _numpy_type(arrow_type: pa.DataType) -> np.dtype[np.generic]:
    numpy_type: np.dtype[np.generic] = np.dtype(arrow_type.to_pandas_dtype())
    return numpy_type.newbyteorder("<")
