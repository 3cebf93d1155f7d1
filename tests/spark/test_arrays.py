"""Numeric columns with nulls are built from their buffers: the same arrays pyarrow's own
conversion gives, for every type the frames use, without its per-row path for int64."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from helpers.gc_runs import collections_during
from msgstream.bridge_spark.data.arrays import numeric_array

TYPES = [
    (np.int8, pa.int8()),
    (np.int16, pa.int16()),
    (np.int32, pa.int32()),
    (np.int64, pa.int64()),
    (np.float32, pa.float32()),
    (np.float64, pa.float64()),
    (np.bool_, pa.bool_()),
    (np.int64, pa.int32()),  # values of another width are converted, as before
]


@pytest.mark.parametrize(("numpy_type", "arrow_type"), TYPES)
@pytest.mark.parametrize("nulls", ["none", "no mask", "some", "all"])
def test_the_same_array_as_pyarrow_converts(
    numpy_type: type[np.generic], arrow_type: pa.DataType, nulls: str
) -> None:
    values = (np.arange(11) % 3).astype(numpy_type)
    null = {
        "none": np.zeros(11, np.bool_),
        "no mask": None,
        "some": np.arange(11) % 4 == 1,
        "all": np.ones(11, np.bool_),
    }[nulls]
    built = numeric_array(values, arrow_type, null)
    built.validate(full=True)
    assert built.type == arrow_type
    assert built.equals(pa.array(values, type=arrow_type, mask=null))
    expected = [None if null is not None and null[i] else values[i].item() for i in range(11)]
    assert built.to_pylist() == expected


def test_a_large_nullable_int64_column_makes_no_object_per_row() -> None:
    values = np.arange(300_000, dtype=np.int64)
    null = values % 3 == 0
    built, collections = collections_during(lambda: numeric_array(values, pa.int64(), null))
    assert built.null_count == 100_000
    assert built[1].as_py() == 1 and built[3].as_py() is None
    assert collections == []
