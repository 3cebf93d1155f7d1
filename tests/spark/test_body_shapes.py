"""Body shapes: a body of a learned shape reads as orjson parses it, or is refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msgstream.bridge_spark.data.body_shapes import MAX_DIGITS, BodyShape, Path, shape_of

_TEXT = st.text(alphabet="ab09_7", max_size=4)
_LEAF = st.one_of(st.integers(0, 10**12), _TEXT, st.booleans(), st.none())
_DOCUMENTS = st.recursive(
    _LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)),
    max_leaves=12,
)


def _numbers(value: Any, path: Path = ()) -> dict[Path, int]:
    """Every number of a parsed document by path (as :class:`BodyShape` names them)."""
    found: dict[Path, int] = {}
    if type(value) is dict:
        for key, item in value.items():
            found.update(_numbers(item, (*path, key)))
    elif type(value) is list:
        for index, item in enumerate(value):
            found.update(_numbers(item, (*path, index)))
    elif type(value) is int:
        found[path] = value
    return found


def _renumbered(value: Any, draw: Any) -> Any:
    """``value`` with every number replaced by another of as many digits."""
    if type(value) is dict:
        return {key: _renumbered(item, draw) for key, item in value.items()}
    if type(value) is list:
        return [_renumbered(item, draw) for item in value]
    if type(value) is int:
        digits = len(str(value))
        return draw(st.integers(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1))
    return value


@settings(max_examples=300, deadline=None)
@given(st.data(), _DOCUMENTS)
def test_bodies_of_a_shape_read_as_orjson_parses_them(data: st.DataObject, document: Any) -> None:
    first = orjson.dumps(document)
    shape = BodyShape.learn(first, orjson.loads(first))
    assert shape is not None
    others = [orjson.dumps(_renumbered(document, data.draw)) for _ in range(3)]
    for body in others:
        assert shape_of(body) == shape.key and shape.fits(body)
    numbers = shape.numbers(b"".join(others), len(others))
    assert numbers is not None
    expected = [_numbers(orjson.loads(body)) for body in others]
    assert set(numbers) == set(expected[0])
    for path, column in numbers.items():
        assert column.tolist() == [each[path] for each in expected]
        assert shape.number(others[1], path) == expected[1][path]


def test_digits_inside_strings_must_be_the_shapes() -> None:
    body = orjson.dumps({"collection_name": "c1", "rows": 5})
    shape = BodyShape.learn(body, orjson.loads(body))
    assert shape is not None
    other = orjson.dumps({"collection_name": "c2", "rows": 7})
    assert shape_of(other) == shape.key
    assert not shape.fits(other)
    assert shape.fits(orjson.dumps({"collection_name": "c1", "rows": 7}))


def test_a_number_with_a_leading_zero_or_too_many_digits_is_not_read() -> None:
    body = b'{"o":16,"n":20}'
    shape = BodyShape.learn(body, orjson.loads(body))
    assert shape is not None
    assert shape.numbers(body + b'{"o":17,"n":21}', 2) is not None
    assert shape.numbers(body + b'{"o":06,"n":21}', 2) is None  # not JSON
    long = b'{"o":' + b"1" * (MAX_DIGITS + 1) + b"}"
    long_shape = BodyShape.learn(long, orjson.loads(long))
    assert long_shape is not None and long_shape.numbers(long, 1) is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"o": 1}',  # not as orjson writes it
        b'{"o":1,"o":2}',  # a key twice
        b'{"o":1.5}',
        b'{"o":-1}',
        b'{"o":"\\u0031"}',  # an escaped digit
    ],
)
def test_a_body_orjson_would_not_write_the_same_has_no_shape(body: bytes) -> None:
    assert BodyShape.learn(body, orjson.loads(body)) is None


def test_numbers_of_many_bodies_in_one_pass() -> None:
    bodies = [orjson.dumps({"rows": r, "buf": {"o": 100 + r, "n": 8 * r}}) for r in (2, 3, 9)]
    shape = BodyShape.learn(bodies[0], orjson.loads(bodies[0]))
    assert shape is not None
    numbers = shape.numbers(b"".join(bodies), 3)
    assert numbers is not None
    assert {path: column.tolist() for path, column in numbers.items()} == {
        ("rows",): [2, 3, 9],
        ("buf", "o"): [102, 103, 109],
        ("buf", "n"): [16, 24, 72],
    }
    assert all(column.dtype == np.int64 for column in numbers.values())
