"""JSON texts cut out of one serialised list must equal serialising value by value."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from msgstream.bridge_spark.data.varlen import json_texts

TRICKY = st.sampled_from(['"', "\\", "\\\\", '\\"', ",", "[", "]", "{", "}", "é", "\n", "\x00"])
TEXT = st.lists(st.one_of(TRICKY, st.text(max_size=4)), max_size=6).map("".join)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False,
    allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)  # fmt: skip


def expected(values: list[Any], mask: list[bool] | None = None) -> list[str | None]:
    out = []
    for i, value in enumerate(values):
        null = value is None or (mask is not None and mask[i])
        out.append(None if null else orjson.dumps(value).decode())
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(JSON, max_size=12))
def test_texts_match_value_by_value_serialisation(values: list[Any]) -> None:
    assert json_texts(values).to_pylist() == expected(values)


@given(st.lists(JSON, min_size=1, max_size=8), st.data())
def test_mask_marks_nulls(values: list[Any], data: st.DataObject) -> None:
    mask = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    texts = json_texts(values, np.array(mask))
    assert texts.to_pylist() == expected(values, mask)


def test_simple_cases() -> None:
    assert json_texts([]).to_pylist() == []
    assert json_texts([None]).to_pylist() == [None]
    assert json_texts([{"a": [1, {"b": "x,y"}]}, "s", 3, [], {}]).to_pylist() == [
        '{"a":[1,{"b":"x,y"}]}', '"s"', "3", "[]", "{}"
    ]  # fmt: skip
    assert json_texts(['\\"', "\\\\", '"']).to_pylist() == ['"\\\\\\""', '"\\\\\\\\"', '"\\""']
