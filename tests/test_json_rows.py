"""JSON rows against a collection schema: what `produce` and `schema --infer` rely on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from msgstream.cli.common import CliError
from msgstream.cli.json_rows import RowColumns, RowMismatch, infer_schema, read_schema_file
from msgstream.cli.row_lines import BadLines, InvalidLineError, LineAt, RowLines, parse_row
from msgstream.wire.schema import CollectionSchema, DataType, FieldSchema


def fields(schema: CollectionSchema) -> list[tuple[str, str, bool, bool, int | None]]:
    return [(f.name, f.dtype.value, f.is_primary, f.nullable, f.dim) for f in schema.fields]


AT = LineAt("stdin", 3)


def test_a_line_is_a_json_object_or_blank() -> None:
    assert parse_row('{"a": 1}\r\n', AT) == {"a": 1}
    assert parse_row(b'{"a": "\xc3\xa9"}\n', AT) == {"a": "\u00e9"}
    assert parse_row("  \t\n", AT) is None
    assert parse_row(b"\n", AT) is None
    assert parse_row("[1, 2]\n", AT, as_text=True) == {"text": "[1, 2]"}
    assert parse_row(b" x \r\n", AT, as_text=True) == {"text": " x "}
    assert parse_row("\n", AT, as_text=True) is None


@pytest.mark.parametrize(
    ("line", "message", "column"),
    [
        ('{"id": 1, "name": \n', "invalid JSON: unexpected end of data", 19),
        ("hello", "invalid JSON: unexpected character, expected a JSON value", 1),
        ('{"\u00e9": }', "invalid JSON: unexpected character, expected a JSON value", 7),
        ('{"a": 1} x', "invalid JSON: unexpected content after document", 10),
        ("[1, 2]", "expected a JSON object (one row per line), got an array", 1),
        ("  12.5", "expected a JSON object (one row per line), got a number", 3),
        ("true", "expected a JSON object (one row per line), got a boolean", 1),
        ("null", "expected a JSON object (one row per line), got null", 1),
        (b'{"\xc3\xa9": \xff}', "not UTF-8 text: byte 0xff cannot start a character", 7),
    ],
)
def test_a_line_that_is_not_a_json_object_is_named_with_its_column(
    line: str | bytes, message: str, column: int
) -> None:
    with pytest.raises(InvalidLineError) as info:
        parse_row(line, AT)
    assert (info.value.problem, info.value.column, info.value.at) == (message, column, AT)
    assert str(info.value) == f"stdin line 3, column {column}: {message}"
    assert str(info.value.with_outcome("nothing was sent")) == (
        f"stdin line 3, column {column}: {message} (nothing was sent)"
    )


def test_rows_are_numbered_across_batches_and_the_first_bad_line_stops() -> None:
    lines = RowLines("rows.jsonl", BadLines(skip=False))
    assert list(lines.rows(['{"a": 1}\n', "\n"])) == [(LineAt("rows.jsonl", 1), {"a": 1})]
    rows = lines.rows(['{"a": 2}', "oops", '{"a": 3}'])
    assert next(rows) == (LineAt("rows.jsonl", 3), {"a": 2})
    with pytest.raises(InvalidLineError) as info:
        next(rows)
    assert list(rows) == []  # nothing after the bad line
    assert str(info.value) == (
        "rows.jsonl line 4, column 1: invalid JSON: unexpected character, expected a JSON value"
    )


def test_skipped_lines_are_counted_and_the_first_ten_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = BadLines(skip=True)
    assert (bad.summary(), bad.exit_code) == ("", 0)
    lines = ["x"] * 3 + ['{"ok": 1}'] + ["[]"] * 9
    rows = list(RowLines("stdin", bad).rows(lines))
    assert rows == [(LineAt("stdin", 4), {"ok": 1})]
    assert (bad.count, bad.shown, bad.exit_code) == (12, [1, 2, 3, 5, 6, 7, 8, 9, 10, 11], 1)
    assert bad.summary() == "skipped=12 (lines 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, ...)"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 11
    assert err[0] == (
        "warning: skipped stdin line 1, column 1: invalid JSON: unexpected character, expected "
        "a JSON value"
    )
    assert err[9] == (
        "warning: skipped stdin line 11, column 1: expected a JSON object (one row per line), "
        "got an array"
    )
    assert err[10] == "warning: further lines skipped are counted, not shown"
    one = BadLines(skip=True)
    one.reject(InvalidLineError(LineAt("f", 7), "no"))
    assert one.summary() == "skipped=1 (line 7)"


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
