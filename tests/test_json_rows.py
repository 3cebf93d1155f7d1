"""JSON rows against a collection schema: what `produce` and `schema --infer` rely on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from msgstream.cli.common import CliError
from msgstream.cli.json_rows import (
    RowColumns,
    RowMismatch,
    infer_schema,
    parse_line,
    read_schema_file,
)
from msgstream.schema import CollectionSchema, DataType, FieldSchema


def fields(schema: CollectionSchema) -> list[tuple[str, str, bool, bool, int | None]]:
    return [(f.name, f.dtype.value, f.is_primary, f.nullable, f.dim) for f in schema.fields]


def test_parse_line_takes_objects_and_wraps_everything_else() -> None:
    assert parse_line('{"a": 1}') == {"a": 1}
    assert parse_line("[1, 2]") == {"text": "[1, 2]"}
    assert parse_line("hello") == {"text": "hello"}


def test_infer_merges_types_and_marks_optional_fields_nullable() -> None:
    rows = [
        {"id": 1, "price": 2, "name": "a", "emb": [1, 2], "flag": True},
        {"id": 2, "price": 2.5, "name": None, "emb": [1, 2, 3], "extra": {"k": 1}},
        {"id": 3, "price": 1, "name": "c", "emb": [0.5, 1], "flag": 1},
    ]
    assert fields(infer_schema(rows, "items")) == [
        ("id", "int64", True, False, None),  # 'id' qualifies: an int in every row
        ("price", "double", False, False, None),  # int and float widen to double
        ("name", "varchar", False, True, None),  # null in one row
        ("emb", "json", False, False, None),  # vectors of two dims
        ("flag", "json", False, True, None),  # bool and int do not merge; absent once
        ("extra", "json", False, True, None),
    ]
    one = infer_schema([{"id": "a", "v": [1.0, 2.0]}], "one", all_nullable=True)
    assert fields(one) == [
        ("id", "varchar", True, False, None),
        ("v", "float_vector", False, True, 2),
    ]


def test_infer_primary_key_rules() -> None:
    rows = [{"sku": "x", "id": 1.5}, {"sku": "y", "id": 2.5}]
    assert infer_schema(rows, "c").primary_field is None  # a double id is no key
    schema = infer_schema(rows, "c", "sku")
    assert schema.primary_field == FieldSchema("sku", DataType.VARCHAR, is_primary=True)
    with pytest.raises(RowMismatch, match=r"field 'id' cannot be the primary key: it must be an"):
        infer_schema(rows, "c", "id")
    with pytest.raises(RowMismatch, match="field 'sku' cannot be the primary key"):
        infer_schema([{"sku": "x"}, {"other": 1}], "c", "sku")
    with pytest.raises(RowMismatch, match="no rows to infer a schema from"):
        infer_schema([], "c")


def test_row_columns_build_widen_and_fill_nulls() -> None:
    schema = CollectionSchema(
        "c",
        (
            FieldSchema("id", DataType.INT64, is_primary=True),
            FieldSchema("small", DataType.INT8, nullable=True),
            FieldSchema("score", DataType.FLOAT, nullable=True),
            FieldSchema("v", DataType.FLOAT_VECTOR, dim=2, nullable=True),
            FieldSchema("ok", DataType.BOOL, nullable=True),
            FieldSchema("doc", DataType.JSON, nullable=True),
        ),
    )
    columns = RowColumns(schema).build({"id": 5, "score": 3, "doc": [1, "a"]})
    by_name = {c.name: c for c in columns}
    assert [c.name for c in columns] == ["id", "small", "score", "v", "ok", "doc"]
    assert by_name["id"].values.tolist() == [5] and by_name["id"].valid is None  # type: ignore[union-attr]
    assert by_name["score"].values.tolist() == [3.0]  # type: ignore[union-attr]
    assert by_name["doc"].values == [[1, "a"]]
    for name in ("small", "v", "ok"):
        valid = by_name[name].valid
        assert valid is not None and valid.tolist() == [False]
    assert np.asarray(by_name["v"].values).shape == (1, 2)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"id": 1, "zz": 0},
            "field 'zz' is not in collection 'c' (fields: ['id', 'ok', 'small', 'v'])",
        ),
        ({"small": 1}, "field 'id' is missing or null, and it is not nullable"),
        ({"id": None}, "field 'id' is missing or null, and it is not nullable"),
        ({"id": "7"}, "field 'id': \"7\" does not fit type int64"),
        ({"id": True}, "field 'id': true does not fit type int64"),
        ({"id": 1, "small": 300}, "field 'small': 300 does not fit type int8"),
        ({"id": 1, "v": [1, 2, 3]}, "field 'v': [1,2,3] does not fit type float_vector[2]"),
        ({"id": 1, "ok": 1}, "field 'ok': 1 does not fit type bool"),
        ({"id": 2**63}, "field 'id': 9223372036854775808 does not fit type int64"),
        ({"id": 1, "ok": "y" * 50}, "field 'ok': \"" + "y" * 36 + "... does not fit type bool"),
    ],
)
def test_row_columns_refuse_what_does_not_fit_naming_the_field(
    row: dict[str, object], message: str
) -> None:
    schema = CollectionSchema(
        "c",
        (
            FieldSchema("id", DataType.INT64, is_primary=True),
            FieldSchema("small", DataType.INT8, nullable=True),
            FieldSchema("v", DataType.FLOAT_VECTOR, dim=2, nullable=True),
            FieldSchema("ok", DataType.BOOL, nullable=True),
        ),
    )
    with pytest.raises(RowMismatch) as info:
        RowColumns(schema).build(row)
    assert str(info.value) == message


def test_read_schema_file_names_the_option_and_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    schema = CollectionSchema("c", (FieldSchema("id", DataType.INT64, is_primary=True),))
    good.write_text(json.dumps(schema.to_dict()), encoding="utf-8")
    assert read_schema_file(str(good)) == schema
    cases = {
        "missing.json": None,
        "text.json": "not json",
        "list.json": "[1]",
        "nofields.json": '{"name": "c"}',
        "badtype.json": '{"name": "c", "fields": [{"name": "x", "dtype": "int128"}]}',
    }
    messages = []
    for name, text in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text, encoding="utf-8")
        with pytest.raises(CliError) as info:
            read_schema_file(str(path), "--schema")
        messages.append(str(info.value))
    assert (
        messages[0]
        == f"--schema: cannot read {tmp_path / 'missing.json'}: No such file or directory"
    )
    assert messages[1].startswith(f"--schema: {tmp_path / 'text.json'} is not JSON: ")
    assert messages[2] == (
        f"--schema: {tmp_path / 'list.json'} is not a collection schema: expected a JSON "
        "object, got list"
    )
    assert messages[3] == (
        f"--schema: {tmp_path / 'nofields.json'} is not a collection schema: no 'fields' key"
    )
    assert messages[4].startswith(
        f"--schema: {tmp_path / 'badtype.json'} is not a collection schema: field 'x': unknown "
        "data type 'int128'"
    )
