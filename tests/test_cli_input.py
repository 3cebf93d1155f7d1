# ruff: noqa: F811  (test_cli's fixtures are imported, then named as arguments)
"""Input that does not parse is never stored: ``msgstream produce``'s bad lines, and rows
whose schema conflicts with the one the channel already declares. Every run reads back
what the channel holds (a rocksmq store under ``tmp_path``)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from msgstream.cli.produce import synthetic_schema
from test_cli import TO_LATEST, Cli, _isolated_env, cli, config  # noqa: F401  (fixtures)


def feed(monkeypatch: pytest.MonkeyPatch, data: str | bytes) -> None:
    """Make ``data`` the command's stdin (bytes: a byte stream under the text, as a real
    stdin has)."""
    if isinstance(data, str):
        monkeypatch.setattr(sys, "stdin", io.StringIO(data))
    else:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def read_back(cli: Cli, channel: str) -> list[dict[str, Any]]:
    """Every message the channel holds, time ticks included, in order."""
    return [m for p in cli.packs("--channel", channel, "--from", "earliest", *TO_LATEST)
            for m in p["msgs"]]  # fmt: skip


def stored(cli: Cli, channel: str) -> list[tuple[Any, ...]]:
    """What the channel holds but time ticks: ``("create", collection, fields)`` and
    ``("insert", collection, columns)``, in order."""
    found: list[tuple[Any, ...]] = []
    for m in read_back(cli, channel):
        if m["type"] == "CreateCollectionMsg":
            fields = [(f["name"], f["dtype"]) for f in m["schema"]["fields"]]
            found.append(("create", m["collection_name"], fields))
        elif m["type"] == "InsertMsg":
            found.append(("insert", m["collection_name"], m["fields"]))
        else:
            assert m["type"] == "TimeTickMsg", m
    return found


ID_NAME = [("id", "int64"), ("name", "varchar")]


def insert(row_id: int, name: str | None) -> tuple[Any, ...]:
    return ("insert", "msgstream_cli", {"id": [row_id], "name": [name]})


def test_a_malformed_line_is_an_error_and_nothing_is_stored(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed(monkeypatch, '{"id": 1, "name": \n')
    code, out, err = cli("produce", "--channel", "m-1")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: stdin line 1, column 19: invalid JSON: unexpected end of data (nothing was sent)"
    ]
    assert stored(cli, "m-1") == []  # not even the collection's CreateCollectionMsg


@pytest.mark.parametrize("batch", ["1", "100"])
def test_the_rows_before_a_bad_line_are_sent_and_nothing_from_it_on(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, batch: str
) -> None:
    """However the lines are batched: the bad line is never in a batch that is sent."""
    lines = [
        '{"id": 1, "name": "a"}',
        "",
        '{"id": 2, "name": "b"}',
        '{"id": 3, "name": "c",}',
        '{"id": 4, "name": "d"}',
    ]
    feed(monkeypatch, "\n".join(lines) + "\n")
    code, out, err = cli("produce", "--channel", "m-2", "--batch", batch, "--json")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: stdin line 4, column 22: invalid JSON: trailing comma is not allowed (the 2 "
        "rows before it were sent)"
    ]
    assert stored(cli, "m-2") == [
        ("create", "msgstream_cli", ID_NAME),
        insert(1, "a"),
        insert(2, "b"),
    ]


def test_skip_invalid_stores_exactly_the_good_rows_and_names_the_bad_lines(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = [b'{"id": 1, "name": "a"}', b'{"id": 2}', b'{"id": 3, "name": "c"}']
    bad = [
        b"plain text",  # 2
        b'{"id": 9, "name": ',  # 3
        b"[1, 2]",  # 4
        b"\xff{}",  # 5: not UTF-8
        b'{"id": "x"}',  # 6: does not fit the schema of line 1
        b'{"id": 9, "zz": 1}',  # 7
        b'{"name": "no id"}',  # 8
        b"null",  # 9
        b'  "text"',  # 10
        b"{,}",  # 11
        b"{",  # 13 (12 is blank)
        b"nope",  # 14
    ]
    lines = [good[0], *bad[:10], b"", bad[10], bad[11], good[1], b"   ", good[2]]
    feed(monkeypatch, b"\n".join(lines) + b"\n")
    code, out, err = cli("produce", "--channel", "m-3", "--skip-invalid", "--batch", "4")
    assert code == 1  # not all of the input was used
    assert out.startswith("produced: messages=3 channels=1 ticks=")
    assert out.endswith(" skipped=12 (lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, ...)\n")
    assert err.splitlines() == [
        "warning: skipped stdin line 2, column 1: invalid JSON: unexpected character, expected "
        "a JSON value",
        "warning: skipped stdin line 3, column 19: invalid JSON: unexpected end of data",
        "warning: skipped stdin line 4, column 1: expected a JSON object (one row per line), got "
        "an array",
        "warning: skipped stdin line 5, column 1: not UTF-8 text: byte 0xff cannot start a "
        "character",
        "warning: skipped stdin line 6: field 'id': \"x\" does not fit type int64",
        "warning: skipped stdin line 7: field 'zz' is not in collection 'msgstream_cli' "
        "(fields: ['id', 'name'])",
        "warning: skipped stdin line 8: field 'id' is missing or null, and it is not nullable",
        "warning: skipped stdin line 9, column 1: expected a JSON object (one row per line), got "
        "null",
        "warning: skipped stdin line 10, column 3: expected a JSON object (one row per line), "
        "got a string",
        "warning: skipped stdin line 11, column 2: invalid JSON: unexpected character, expected a "
        "string key",
        "warning: further lines skipped are counted, not shown",
    ]
    assert stored(cli, "m-3") == [
        ("create", "msgstream_cli", ID_NAME),
        insert(1, "a"),
        insert(2, None),
        insert(3, "c"),
    ]
    # the same in --json: the count and the first line numbers
    feed(monkeypatch, b"\n".join(lines) + b"\n")
    code, out, _ = cli("produce", "--channel", "m-4", "--skip-invalid", "--json")
    summary = orjson.loads(out)
    assert (code, summary["messages"], summary["skipped"]) == (1, 3, 12)
    assert summary["skipped_lines"] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]


def test_a_first_line_skipped_sends_no_collection_for_it(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema is inferred from the first row that gives one, not from a bad line."""
    feed(monkeypatch, 'oops\n{"id": 5, "name": "e"}\n')
    code, out, err = cli("produce", "--channel", "m-5", "--skip-invalid")
    assert code == 1 and out.endswith(" skipped=1 (line 1)\n")
    assert err.splitlines() == [
        "warning: skipped stdin line 1, column 1: invalid JSON: unexpected character, expected "
        "a JSON value"
    ]
    assert stored(cli, "m-5") == [("create", "msgstream_cli", ID_NAME), insert(5, "e")]


def test_a_row_that_does_not_fit_the_declared_schema_is_refused_before_anything_is_sent(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    feed(monkeypatch, '{"id": 1, "name": "a"}\n')
    cli.ok("produce", "--channel", "d")  # declares {id int64, name varchar}
    before = read_back(cli, "d")
    # the first row of this run would infer name: int64; the channel says varchar
    feed(monkeypatch, '{"id": 2, "name": 5}\n{"id": 3, "name": "c"}\n')
    code, out, err = cli("produce", "--channel", "d", "--no-ticks")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: stdin line 1: field 'name': 5 does not fit type varchar (nothing was sent)"
    ]
    assert read_back(cli, "d") == before  # unchanged, to the message

    # --skip-invalid: the rows that fit the declared schema go in, under it
    feed(monkeypatch, '{"id": 2, "name": 5}\n{"id": 3, "name": "c"}\n')
    code, out, _ = cli("produce", "--channel", "d", "--skip-invalid")
    assert code == 1 and out.endswith(" skipped=1 (line 1)\n")
    assert stored(cli, "d") == [
        ("create", "msgstream_cli", ID_NAME),
        insert(1, "a"),
        ("create", "msgstream_cli", ID_NAME),
        insert(3, "c"),
    ]


def test_a_schema_conflicting_with_the_declared_one_is_refused_before_sending(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    feed(monkeypatch, '{"id": 1, "name": "a"}\n')
    cli.ok("produce", "--channel", "s")
    declared = tmp_path / "declared.json"
    cli.ok("schema", "--channel", "s", "--out", str(declared))
    data = json.loads(declared.read_text(encoding="utf-8"))
    data["fields"][1]["dtype"] = "json"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data), encoding="utf-8")
    before = read_back(cli, "s")

    feed(monkeypatch, '{"id": 2, "name": "b"}\n')
    code, out, err = cli("produce", "--channel", "s", "--schema", str(other))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: --schema {other}: channel 's' already declares collection 'msgstream_cli' "
        "with another schema: field 'name' is declared varchar nullable, not json nullable "
        "(`msgstream schema --channel s --collection msgstream_cli` prints it; or produce "
        "into another --collection)"
    ]
    code, out, err = cli("produce", "--channel", "s", "--count", "3")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: --count rows: channel 's' already declares collection 'msgstream_cli' with "
        "another schema: field 'vec' is not declared (`msgstream schema --channel s "
        "--collection msgstream_cli` prints it; or produce into another --collection)"
    ]
    assert read_back(cli, "s") == before  # unchanged, to the message: not even a tick

    feed(monkeypatch, '{"id": 2, "name": "b"}\n')  # the declared schema itself is fine
    cli.ok("produce", "--channel", "s", "--schema", str(declared))
    assert stored(cli, "s")[-1] == insert(2, "b")
    for _ in range(2):  # and so are --count rows where the channel declares theirs
        cli.ok("produce", "--channel", "c", "--count", "2", "--collection", "orders")
    creates = [m for m in read_back(cli, "c") if m["type"] == "CreateCollectionMsg"]
    assert [m["schema"] for m in creates] == [synthetic_schema("orders").to_dict()] * 2


def test_text_lines_are_rows_of_one_text_field(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    feed(monkeypatch, 'hello\n\n[1, 2]\n  spaced \n{"id": 1}\n')
    code, _, err = cli("produce", "--channel", "t", "--text")
    assert code == 0
    assert err.startswith("note: collection 'msgstream_cli' has no primary key")
    fields = ("insert", "msgstream_cli")
    assert stored(cli, "t") == [
        ("create", "msgstream_cli", [("text", "varchar")]),
        (*fields, {"text": ["hello"]}),
        (*fields, {"text": ["[1, 2]"]}),
        (*fields, {"text": ["  spaced "]}),
        (*fields, {"text": ['{"id": 1}']}),
    ]


@pytest.mark.parametrize("flag", ["--text", "--skip-invalid"])
def test_stdin_options_are_refused_with_count(cli: Cli, flag: str) -> None:
    code, out, err = cli("produce", "--channel", "x", "--count", "3", flag)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: {flag}: --count rows have their own schema; {flag} is for stdin rows"
    ]
