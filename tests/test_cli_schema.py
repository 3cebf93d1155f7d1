# ruff: noqa: F811  (test_cli's fixtures are imported, then named as arguments)
"""``produce`` writes what ``ingest`` can read: the collection's schema, the ``schema``
command, and ingest's checks that run before Spark starts (no Spark JVM here)."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from msgstream.bridge_spark.cli import ingest
from msgstream.bridge_spark.data.checkpoint import CheckpointState, save_checkpoint
from msgstream.cli.produce import synthetic_schema
from test_cli import Cli, _isolated_env, cli, config, data_msgs  # noqa: F401  (fixtures)

pytest.importorskip("pyspark")  # the schema command and ingest come with the spark extra


@pytest.fixture(autouse=True)
def no_spark(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Spark must not start in these tests: every check here comes before it."""
    started: list[str] = []

    @contextmanager
    def refuse(master: str, conf: Any = ()) -> Iterator[None]:
        started.append(master)
        raise AssertionError("Spark was started")
        yield

    monkeypatch.setattr(ingest, "spark_session", refuse)
    return started


def schema_json(cli: Cli, *argv: str) -> dict[str, Any]:
    out = cli.ok("schema", *argv)
    data: dict[str, Any] = json.loads(out)
    return data


def last_error(cli: Cli, *argv: str, code: int = 2) -> str:
    got, _, err = cli(*argv)
    assert got == code, err
    return err.strip().splitlines()[-1]


def test_schema_reads_what_produce_announced(cli: Cli) -> None:
    cli.ok(
        "produce", "--channel", "s0", "--channel", "s1", "--count", "5", "--collection", "orders"
    )
    assert schema_json(cli) == synthetic_schema("orders").to_dict()  # every channel of the store
    assert schema_json(cli, "--channel", "s1", "--collection", "orders")["name"] == "orders"
    assert last_error(cli, "schema", "--channel", "s0", "--collection", "other") == (
        "error: no CreateCollectionMsg for collection 'other' in channels ['s0']; give the "
        "collection schema explicitly"
    )
    assert last_error(cli, "schema", "--channel", "zz") == (
        "error: channel 'zz' does not exist on backend 'rocksmq'"
    )
    cli.ok("produce", "--channel", "bare", "--count", "2", "--no-create-collection")
    assert last_error(cli, "schema", "--channel", "bare") == (
        "error: no CreateCollectionMsg for any collection in channels ['bare']; give the "
        "collection schema explicitly"
    )


def test_schema_infer_then_produce_with_it(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        '{"sku": "a", "price": 2, "tags": ["x"]}\n\n{"sku": "b", "price": 2.5}\n', encoding="utf-8"
    )
    out = tmp_path / "items.json"
    assert cli.ok("schema", "--infer", str(rows), "--collection", "items", "--key", "sku",
                  "--out", str(out)) == ""  # fmt: skip
    written = json.loads(out.read_text(encoding="utf-8"))
    assert [(f["name"], f["dtype"], f["is_primary"], f["nullable"]) for f in written["fields"]] == [
        ("sku", "varchar", True, False),
        ("price", "double", False, False),
        ("tags", "json", False, True),
    ]
    monkeypatch.setattr(sys, "stdin", io.StringIO(rows.read_text(encoding="utf-8")))
    assert schema_json(cli, "--infer", "-", "--collection", "items", "--key", "sku") == written

    # produce --schema: the collection is the schema's; rows are checked against it
    lines = '{"sku": "c", "price": 1}\n{"sku": "d", "price": "x"}\n{"sku": "e", "price": 3.5}\n'
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    code, stdout, err = cli("produce", "--channel", "it", "--schema", str(out), "--skip-invalid")
    assert code == 1
    assert stdout.startswith("produced: messages=2 ")
    assert stdout.strip().endswith("skipped=1 (line 2)")
    assert "warning: skipped stdin line 2: field 'price': \"x\" does not fit type double" in err
    packs = cli.packs("--channel", "it", "--from", "earliest", "--idle-timeout", "0.3")
    (create,) = [m for p in packs for m in p["msgs"] if m["type"] == "CreateCollectionMsg"]
    assert create["schema"] == written and create["collection_name"] == "items"
    assert [m["collection_name"] for m in data_msgs(packs)] == ["items", "items"]
    assert [m["fields"]["price"] for m in data_msgs(packs)] == [[1.0], [3.5]]
    assert schema_json(cli, "--channel", "it") == written


def test_schema_and_produce_refuse_bad_input(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"a": 1.5}\n', encoding="utf-8")
    assert last_error(cli, "schema", "--infer", str(rows), "--key", "a") == (
        "error: --infer: field 'a' cannot be the primary key: it must be an int or a string in "
        "every row"
    )
    assert last_error(cli, "schema", "--infer", str(tmp_path / "none.jsonl")) == (
        f"error: --infer: cannot read {tmp_path / 'none.jsonl'}: No such file or directory"
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert last_error(cli, "schema", "--infer", str(empty)) == (
        "error: --infer: no rows to infer a schema from"
    )
    assert last_error(cli, "schema", "--infer", str(rows), "--channel", "x") == (
        "error: --infer reads rows, not channels: drop --channel"
    )
    assert last_error(cli, "schema", "--key", "a") == (
        "error: --key names the primary key of an inferred schema: add --infer"
    )
    assert last_error(cli, "schema", "--out", str(tmp_path / "no" / "dir.json"), "--infer",
                      str(rows)) == (
        f"error: --out: cannot write {tmp_path / 'no' / 'dir.json'}: No such file or directory"
    )  # fmt: skip

    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(synthetic_schema("orders").to_dict()), encoding="utf-8")
    assert last_error(
        cli, "produce", "--channel", "p", "--count", "3", "--schema", str(schema)
    ) == ("error: --schema: --count rows have their own schema; --schema is for stdin rows")
    assert last_error(cli, "produce", "--channel", "p", "--schema", str(schema), "--collection",
                      "x") == (
        "error: --collection 'x': the --schema file describes collection 'orders'"
    )  # fmt: skip
    assert last_error(cli, "produce", "--channel", "p", "--schema", str(tmp_path / "no.json")) == (
        f"error: --schema: cannot read {tmp_path / 'no.json'}: No such file or directory"
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"v": [1, 2]}\n'))
    code, _, err = cli("produce", "--channel", "nokey")
    assert code == 0
    assert (
        "note: collection 'msgstream_cli' has no primary key (give --key, or rows with an " in err
    )


def test_schema_infer_stops_at_a_bad_line_or_skips_it(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b'{"sku": "a", "price": 2}\n\nplain\n{"sku": "b", "price": 2.5}\n[]\n'
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(data)
    out = tmp_path / "s.json"
    assert last_error(cli, "schema", "--infer", str(rows), "--out", str(out)) == (
        f"error: {rows} line 3, column 1: invalid JSON: unexpected character, expected a JSON value"
    )
    assert not out.exists()
    skipped = [
        "warning: skipped {} line 3, column 1: invalid JSON: unexpected character, expected a "
        "JSON value",
        "warning: skipped {} line 5, column 1: expected a JSON object (one row per line), got an "
        "array",
        "schema: inferred without the lines skipped: skipped=2 (lines 3, 5)",
    ]
    code, stdout, err = cli("schema", "--infer", str(rows), "--key", "sku", "--skip-invalid")
    assert code == 1
    assert [(f["name"], f["dtype"], f["is_primary"]) for f in json.loads(stdout)["fields"]] == [
        ("sku", "varchar", True),
        ("price", "double", False),
    ]
    assert err.splitlines() == [line.format(rows) for line in skipped]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code, from_stdin, err = cli("schema", "--infer", "-", "--key", "sku", "--skip-invalid")
    assert (code, from_stdin) == (1, stdout)
    assert err.splitlines() == [line.format("stdin") for line in skipped]
    assert last_error(cli, "schema", "--skip-invalid") == (
        "error: --skip-invalid skips lines of the rows --infer reads: add --infer"
    )


def test_ingest_checks_everything_it_can_before_spark_starts(
    cli: Cli, tmp_path: Path, no_spark: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = str(tmp_path / "pq")
    cli.ok("produce", "--channel", "g0", "--count", "3", "--no-create-collection")
    assert last_error(cli, "ingest", "--out", out, "--channel", "g0") == (
        "error: no CreateCollectionMsg for any collection in channels ['g0']; give the "
        "collection schema explicitly"
    )
    assert last_error(cli, "ingest", "--out", out, "--channel", "g9") == (
        "error: channel 'g9' does not exist on backend 'rocksmq'"
    )
    cli.ok("produce", "--channel", "g1", "--count", "3", "--collection", "orders")
    assert last_error(cli, "ingest", "--out", out, "--channel", "g1", "--collection", "x") == (
        "error: no CreateCollectionMsg for collection 'x' in channels ['g1']; give the "
        "collection schema explicitly"
    )
    assert last_error(cli, "ingest", "--out", out, "--channel", "g1", "--from", "{bad") == (
        "error: option '--from': expected earliest, latest, JSON positions or @file, got '{bad'"
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"v": 1}\n'))
    cli.ok("produce", "--channel", "g2", "--collection", "nokey")
    assert last_error(cli, "ingest", "--out", out, "--channel", "g2") == (
        "error: field '<primary key>': collection 'nokey' has no primary key field; the "
        "'changes' frame needs one to carry deletes (the 'inserts' frame does not)"
    )
    checkpoint = tmp_path / "cp.json"
    save_checkpoint(checkpoint, CheckpointState(channels=("g0",), collection="orders"))
    assert last_error(
        cli, "ingest", "--out", out, "--channel", "g1", "--checkpoint", str(checkpoint)
    ) == (f"error: checkpoint {checkpoint}: was written for channels ['g0'], not ['g1']")
    assert no_spark == []
