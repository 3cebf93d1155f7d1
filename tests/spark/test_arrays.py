"""Columns are built from their buffers: the same arrays pyarrow's own conversion gives,
for every type the frames use, without its per-row path for int64 and without the
pandas import its first call makes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from helpers.gc_runs import collections_during
from msgstream.bridge_spark.data.arrays import numeric_array, text_array, wrapped

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


@pytest.mark.parametrize(
    "values",
    [np.arange(5, dtype=np.int64), np.zeros(0, np.int8), np.array([1.5, -2.0], np.float32),
     np.array([True, False, True]), np.arange(4, dtype=np.int32)[::2]],
    ids=["int64", "empty", "float32", "bool", "strided"],
)  # fmt: skip
def test_wrapped_numbers_are_pyarrows_array_of_their_type(values: np.ndarray) -> None:
    built = wrapped(values)
    built.validate(full=True)
    assert built.equals(pa.array(values))


@pytest.mark.parametrize("texts", [[], ["a"], ["", "é", "channel-1", ""], ["x" * 1000] * 3])
def test_text_arrays_are_pyarrows_string_array(texts: list[str]) -> None:
    built = text_array(texts)
    built.validate(full=True)
    assert built.equals(pa.array(texts, pa.string()))


def test_a_value_the_type_cannot_hold_is_refused_as_pyarrow_refuses_it() -> None:
    with pytest.raises(pa.ArrowInvalid):
        pa.array(np.array([1, 300]), type=pa.int8())
    with pytest.raises(pa.ArrowInvalid, match="300"):
        numeric_array(np.array([1, 300]), pa.int8(), None)


_CONVERT_ROWS = """
import sys
from msgstream import DeleteMsg, encode
from msgstream.bridge_spark import FrameKind, FrameSchema
from spark.test_convert import ALL_TYPES, all_types_insert, build
from spark.test_columnar import columnar_table

assert "pandas" not in sys.modules, "imported before any row was converted"
ins = all_types_insert()
gone = DeleteMsg(msg_id=9, timestamp=200, collection_name=ins.collection_name, primary_keys=[1])
for kind in FrameKind:
    assert build(kind, (ins, "a"), (gone, "b")).num_rows > 0
payloads = [(encode(all_types_insert(msg_id=i, ts=100 + i)), "a") for i in range(3)]
assert columnar_table(FrameSchema(ALL_TYPES, FrameKind.INSERTS), payloads).num_rows == 9
print("pandas" in sys.modules)
"""


def test_converting_rows_imports_no_pandas() -> None:
    """A Spark Python worker that converts rows never imports pandas (``pa.array``
    would, on its first call): a fresh interpreter converts every kind of frame, both
    ways (decoded messages and payloads), and has not imported it."""
    tests = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", _CONVERT_ROWS], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
