"""The ``msgstream`` command line, run in-process through ``main(argv)`` (plus one run of
the installed console script). Every test uses its own rocksmq store under ``tmp_path``."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from msgstream import (
    Config,
    CreateCollectionMsg,
    DataType,
    InsertMsg,
    SubscriptionPosition,
    TimeTickMsg,
    TsMsg,
    hash_int64,
    load_config,
    new_client,
    new_msgstream,
    positions_from_json,
)
from msgstream.cli import inspection
from msgstream.cli.main import main
from msgstream.cli.produce import synthetic_schema

TICKS_FAST = "msgstream:\n  tick_interval_s: 0.002\n"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No MSGSTREAM_* variable of the caller leaks in; the default store is never home."""
    for var in list(os.environ):
        if var.startswith("MSGSTREAM_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "msgstream.yaml"
    path.write_text(f"rocksmq:\n  path: {tmp_path / 'store'}\n{TICKS_FAST}", encoding="utf-8")
    return path


class Cli:
    """Runs ``main`` with ``--config`` and returns (exit code, stdout, stderr)."""

    def __init__(self, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.config = config
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        command, *rest = argv
        code = main([command, "--config", str(self.config), *rest])
        out, err = self.capsys.readouterr()
        return code, out, err

    def ok(self, *argv: str) -> str:
        code, out, err = self(*argv)
        assert code == 0, f"exit {code}\nstdout:\n{out}\nstderr:\n{err}"
        return out

    def packs(self, *argv: str) -> list[dict[str, Any]]:
        """``consume --json``: the packs printed."""
        out = self.ok("consume", "--json", *argv)
        return [orjson.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture
def cli(config: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(config, capsys)


TO_LATEST = ["--to-latest", "--idle-timeout", "30"]
"""Consume what the channels hold and stop; the idle timeout only keeps a broken bound
from hanging the suite (test_consume_to_latest_reads_what_is_there_and_stops checks that
the runs end as stopped=end)."""


def data_msgs(packs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows' messages: neither ticks nor the collection's announcement."""
    return [
        m
        for p in packs
        for m in p["msgs"]
        if m["type"] not in ("TimeTickMsg", "CreateCollectionMsg")
    ]


# --------------------------------------------------------------------------- produce/consume


def test_produce_count_then_consume_earliest(cli: Cli) -> None:
    out = cli.ok("produce", "--channel", "a", "--channel", "b", "--count", "40", "--batch", "7")
    assert out.startswith("produced: messages=40 channels=2 ticks=")
    assert "msgs_per_s=" in out

    packs = cli.packs("--channel", "a", "--channel", "b", "--from", "earliest", *TO_LATEST)
    msgs = data_msgs(packs)
    assert all(len(p["msgs"]) == 1 for p in packs)  # plain stream: one message per pack
    assert len(msgs) == 40
    assert sorted(m["fields"]["id"][0] for m in msgs) == list(range(40))
    assert sorted(m["row_ids"][0] for m in msgs) == list(range(40))
    assert len({m["msg_id"] for m in msgs}) == 40
    for m in msgs:  # routed by the hash of the primary key, channels in --channel order
        assert m["channel"] == ["a", "b"][hash_int64(m["row_ids"][0]) % 2]
        assert m["fields"]["vec"] == {"dim": 8, "rows": 1}
        assert m["fields"]["text"] == [f"row-{m['row_ids'][0]}"]
    ticks = [m for p in packs for m in p["msgs"] if m["type"] == "TimeTickMsg"]
    assert ticks, "the emitter's final tick is on every channel"
    # each channel starts with the collection's schema, so `ingest` can read it
    for channel in ("a", "b"):
        first = next(m for p in packs for m in p["msgs"] if m["channel"] == channel)
        assert first["type"] == "CreateCollectionMsg"
        assert first["collection_name"] == "msgstream_cli"
        assert first["schema"] == synthetic_schema("msgstream_cli").to_dict()

    # --skip-ticks hides them; plain end_positions are the message's own position
    packs = cli.packs("--channel", "a", "--from", "earliest", "--skip-ticks", "--max-packs", "3")
    assert [p["end_positions"] for p in packs] == [[p["msgs"][0]["position"]] for p in packs]
    assert all(m["type"] == "InsertMsg" for m in data_msgs(packs))


def test_produce_json_lines_from_stdin(
    cli: Cli, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [
        '{"id": 7, "flag": true, "score": 0.5, "name": "x", "emb": [1, 2.5, 3], "meta": {"k": 1}}',
        "plain text, not JSON",
        "",
        '{"id": 8, "score": 2, "meta": null, "emb": [0, 0, 1]}',
        '{"id": 9, "score": "high"}',
        '{"id": 10, "emb": [1, 2]}',
        '{"score": 1.5}',
    ]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out, err = cli(
        "produce", "--channel", "in0", "--channel", "in1", "--start-id", "100", "--skip-invalid"
    )
    assert code == 1  # lines were skipped
    assert out.startswith("produced: messages=2 channels=2 ")
    assert out.strip().endswith(" skipped=4 (lines 2, 5, 6, 7)")
    # the schema comes from the first row; lines that do not fit it are named and skipped
    assert [line for line in err.splitlines() if line.startswith("warning:")] == [
        "warning: skipped stdin line 2, column 1: invalid JSON: unexpected character, expected "
        "a JSON value",
        "warning: skipped stdin line 5: field 'score': \"high\" does not fit type double",
        "warning: skipped stdin line 6: field 'emb': [1,2] does not fit type float_vector[3]",
        "warning: skipped stdin line 7: field 'id' is missing or null, and it is not nullable",
    ]
    # routed by --key: rows with the field "id"
    keyed = '{"id": 7}\n{"id": 8}\n{"id": "seven"}\n'
    monkeypatch.setattr(sys, "stdin", io.StringIO(keyed))
    code, keyed_out, _ = cli(
        "produce", "--channel", "k0", "--channel", "k1", "--key", "id", "--batch", "1",
        "--skip-invalid",
    )  # fmt: skip
    assert code == 1
    assert keyed_out.startswith("produced: messages=2 ")  # "seven" is not an int64 id

    async def read_back(channels: list[str], count: int) -> list[TsMsg]:
        cfg = load_config(config)
        got: list[TsMsg] = []
        async with new_msgstream(cfg) as stream:
            await stream.as_consumer(channels, "check", SubscriptionPosition.EARLIEST)
            while len(got) < count:
                async with asyncio.timeout(5):
                    pack = await anext(aiter(stream))
                got.extend(m for m in pack.msgs if not isinstance(m, TimeTickMsg))
        return got

    read = asyncio.run(read_back(["in0", "in1"], 4))
    creates = [m for m in read if isinstance(m, CreateCollectionMsg)]
    assert len(creates) == 2  # one on each channel, before the rows
    assert creates[0].schema == creates[1].schema
    schema = creates[0].schema
    assert [(f.name, f.dtype, f.is_primary, f.nullable, f.dim) for f in schema.fields] == [
        ("id", DataType.INT64, True, False, None),
        ("flag", DataType.BOOL, False, True, None),
        ("score", DataType.DOUBLE, False, True, None),
        ("name", DataType.VARCHAR, False, True, None),
        ("emb", DataType.FLOAT_VECTOR, False, True, 3),
        ("meta", DataType.JSON, False, True, None),
    ]
    msgs = sorted((m for m in read if isinstance(m, InsertMsg)), key=lambda m: m.timestamp)
    assert all(m.timestamp > c.timestamp for m in msgs for c in creates)
    assert [m.field("id").values[0] for m in msgs] == [7, 8]
    assert msgs[0].field("emb").dim == 3
    assert msgs[0].field("meta").values == [{"k": 1}]
    # the second row: an int widened to the double field, absent fields null
    second = {c.name: c for c in msgs[1].fields}
    assert second["score"].values[0] == 2.0 and second["score"].dtype is DataType.DOUBLE
    assert second["flag"].valid is not None and not second["flag"].valid[0]
    assert second["name"].values[0] is None and second["meta"].values[0] is None
    # row ids count the rows sent from --start-id; routing hashes them by default
    assert [int(m.row_ids[0]) for m in msgs] == [100, 101]
    for msg in msgs:
        assert msg.position is not None
        assert msg.position.channel == ["in0", "in1"][hash_int64(int(msg.row_ids[0])) % 2]

    keyed_msgs = [m for m in asyncio.run(read_back(["k0", "k1"], 4)) if isinstance(m, InsertMsg)]
    assert sorted(m.field("id").values[0] for m in keyed_msgs) == [7, 8]
    for msg in keyed_msgs:
        key = int(msg.field("id").values[0])
        assert msg.position is not None
        assert msg.position.channel == ["k0", "k1"][hash_int64(key) % 2]


def test_produce_stdin_missing_key_is_an_error(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"user": "bob"}\n{"other": 1}\n'))
    code, _, err = cli("produce", "--channel", "k", "--key", "user", "--batch", "1")
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        "error: stdin line 2: the row has no field 'user' to route by (--key) (the row before "
        "it was sent)"
    )


def test_consume_tt_packs_respect_time_bounds(cli: Cli) -> None:
    cli.ok("produce", "--channel", "t0", "--channel", "t1", "--count", "300", "--batch", "5")
    packs = cli.packs(
        "--channel", "t0", "--channel", "t1", "--tt", "--skip-empty", "--idle-timeout", "0.3"
    )
    msgs = data_msgs(packs)
    assert len(msgs) == 300
    assert sorted(m["row_ids"][0] for m in msgs) == list(range(300))
    for pack in packs:
        assert pack["begin_ts"] < pack["end_ts"]
        for m in pack["msgs"]:
            assert pack["begin_ts"] < m["timestamp"] <= pack["end_ts"]
        stamps = [m["timestamp"] for m in pack["msgs"]]
        assert stamps == sorted(stamps)
        assert {p["channel"] for p in pack["end_positions"]} == {"t0", "t1"}
        assert all(p["timestamp"] == pack["end_ts"] for p in pack["end_positions"])
    ends = [p["end_ts"] for p in packs]
    assert ends == sorted(ends)


def test_consume_tt_from_earliest_and_latest(cli: Cli) -> None:
    cli.ok("produce", "--channel", "e0", "--channel", "e1", "--count", "40", "--batch", "5")
    both = ["--channel", "e0", "--channel", "e1", "--tt", "--skip-empty", *TO_LATEST]
    everything = data_msgs(cli.packs(*both, "--from", "earliest", "--subname", "a"))
    assert sorted(m["row_ids"][0] for m in everything) == list(range(40))
    assert data_msgs(cli.packs(*both, "--from", "latest", "--subname", "b")) == []


def test_consume_tt_from_positions_resumes_exactly_after(cli: Cli, tmp_path: Path) -> None:
    channels = ["--channel", "r0", "--channel", "r1", "--channel", "r2"]
    # Four runs, each closed by its final tick, so there are at least four data packs
    # whatever the machine's speed (one fast run can fit in a single 50 ms tick interval).
    for start in range(0, 200, 50):
        cli.ok("produce", *channels, "--count", "50", "--batch", "4", "--start-id", str(start))
    first = cli.packs(*channels, "--tt", "--skip-empty", "--max-packs", "3", "--subname", "s1")
    seen = [m["msg_id"] for m in data_msgs(first)]
    assert 0 < len(seen) < 200
    # more data after the checkpoint
    cli.ok("produce", *channels, "--count", "50", "--start-id", "1000")

    checkpoint = orjson.dumps(first[-1]["end_positions"]).decode()
    rest = cli.packs("--tt", "--from", checkpoint, *TO_LATEST, "--subname", "s2")
    rest_ids = [m["msg_id"] for m in data_msgs(rest)]
    assert not set(seen) & set(rest_ids)
    assert len(rest_ids) == len(set(rest_ids)) == 250 - len(seen)
    assert rest[0]["begin_ts"] == first[-1]["end_ts"]

    # the same through --save-positions and --from @FILE, in two steps
    saved = tmp_path / "positions.json"
    step = cli.packs(
        *channels, "--tt", "--from", checkpoint, "--max-packs", "2", "--skip-empty",
        "--save-positions", str(saved),
    )  # fmt: skip
    step_ids = [m["msg_id"] for m in data_msgs(step)]
    after = cli.packs("--tt", "--from", f"@{saved}", *TO_LATEST)
    assert step_ids + [m["msg_id"] for m in data_msgs(after)] == rest_ids


def test_consume_to_latest_reads_what_is_there_and_stops(cli: Cli, tmp_path: Path) -> None:
    channels = ["--channel", "z0", "--channel", "z1"]
    cli.ok("produce", *channels, "--count", "40", "--batch", "5")
    saved = tmp_path / "positions.json"
    code, out, err = cli(
        "consume", *channels, "--from", "earliest", *TO_LATEST, "--json",
        "--save-positions", str(saved),
    )  # fmt: skip
    assert code == 0, err
    plain = [orjson.loads(line) for line in out.splitlines()]
    assert sorted(m["row_ids"][0] for m in data_msgs(plain)) == list(range(40))
    assert "stopped=end" in err.splitlines()[-1]
    # The runs end by themselves, exactly at the newest messages (not stopped=idle).
    tt = cli.packs(*channels, "--tt", "--from", "earliest", *TO_LATEST, "--skip-empty")
    assert sorted(m["row_ids"][0] for m in data_msgs(tt)) == list(range(40))
    assert cli.packs(*channels, "--from", "latest", *TO_LATEST) == []

    cli.ok("produce", *channels, "--count", "10", "--start-id", "100", "--no-create-collection")
    rest = cli.packs(*channels, "--from", f"@{saved}", *TO_LATEST)
    assert sorted(m["row_ids"][0] for m in data_msgs(rest)) == list(range(100, 110))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--channel", "a"], "--to-latest needs --from (earliest, latest or positions)"),
        (
            ["--channel", "a", "--from", "earliest", "--wait-for-channels"],
            "--to-latest reads what the channels hold now; it cannot wait for channels",
        ),
        (
            [
                "--channel",
                "a",
                "--channel",
                "b",
                "--from",
                '{"channel": "a", "msg_id": "cgAAAAAAAAAB"}',
            ],
            "--to-latest: no position for channel(s) ['b'] in --from",
        ),
    ],
)
def test_to_latest_needs_a_known_start(cli: Cli, argv: list[str], message: str) -> None:
    code, out, err = cli("consume", *argv, "--to-latest")
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: {message}")
    assert out == ""


def test_consume_plain_from_position_starts_after_it(cli: Cli) -> None:
    cli.ok("produce", "--channel", "pl", "--count", "10", "--no-ticks")
    first = cli.packs("--channel", "pl", "--max-packs", "4")
    position = orjson.dumps(first[-1]["end_positions"][0]).decode()  # a single object
    rest = cli.packs("--channel", "pl", "--from", position, *TO_LATEST)
    ids = [m["row_ids"][0] for m in data_msgs(first + rest)]
    assert ids == list(range(10))
    again = cli.packs("--from", position, "--inclusive", "--max-packs", "1")
    assert again[0]["msgs"][0]["row_ids"] == first[-1]["msgs"][0]["row_ids"]


def test_consume_latest_sees_only_new_messages(cli: Cli) -> None:
    cli.ok("produce", "--channel", "lt", "--count", "5", "--no-ticks")
    assert cli.packs("--channel", "lt", "--from", "latest", *TO_LATEST) == []


def test_consume_ack_and_inspect_lag(cli: Cli) -> None:
    cli.ok("produce", "--channel", "i0", "--channel", "i1", "--count", "30", "--no-ticks",
           "--no-create-collection")  # fmt: skip
    code, out, err = cli(
        "consume", "--channel", "i0", "--channel", "i1", "--subname", "reader", "--ack",
        "--max-packs", "10",
    )  # fmt: skip
    assert code == 0
    assert out.count("InsertMsg") == 10
    assert err.strip().splitlines()[-1].startswith("consumed: packs=10 messages=10 ")
    assert "acked=10" in err

    report = orjson.loads(cli.ok("inspect", "--json"))
    assert report["backend"] == "rocksmq"
    channels = {c["channel"]: c for c in report["channels"]}
    assert set(channels) == {"i0", "i1"}
    total = sum(c["messages"] for c in channels.values())
    assert total == 30
    lag = 0
    for view in channels.values():
        assert view["first_id"] == "1"
        assert view["latest_id"] == str(view["messages"])
        (sub,) = view["subscriptions"]
        assert sub["name"] == "reader"
        acked = 0 if sub["acked_id"] is None else int(sub["acked_id"])
        assert sub["lag"] == view["messages"] - acked
        assert sub["last_active_ms"] > 0
        lag += sub["lag"]
    assert lag == 20

    # resuming the subscription continues after the last ack
    rest = cli.packs("--channel", "i0", "--channel", "i1", "--subname", "reader",
                     "--idle-timeout", "0.3")  # fmt: skip
    assert len(data_msgs(rest)) == 20

    table = cli.ok("inspect", "--channel", "i1")
    assert "i1" in table and "reader" in table and "i0" not in table


def test_consume_tt_ack_never_skips_undelivered_messages(cli: Cli) -> None:
    """A pack's end position on a channel may be its first *undelivered* message; the CLI
    must not ack it (acks are inclusive), or a resumed subscription would skip it."""
    cli.ok("produce", "--channel", "ua", "--count", "5")
    cli.ok("produce", "--channel", "ub", "--count", "5", "--start-id", "100")
    both = ["--channel", "ua", "--channel", "ub", "--tt", "--subname", "acker"]
    first = cli.packs(*both, "--ack", "--max-packs", "1", "--skip-empty")
    first_ids = sorted(m["row_ids"][0] for m in data_msgs(first))
    assert first_ids == list(range(5))  # ub's rows are above ua's last tick: not yet due
    cli.ok("produce", "--channel", "ua", "--count", "1", "--start-id", "5")
    cli.ok("produce", "--channel", "ub", "--count", "0")  # only a tick: time moves on
    rest = cli.packs(*both, "--idle-timeout", "0.3")
    rest_ids = sorted(m["row_ids"][0] for m in data_msgs(rest))
    assert rest_ids == [5, 100, 101, 102, 103, 104]


def test_inspect_without_admin_api(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    class Bare:
        """A client with only the backend contract (no admin calls)."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.backend_name = "bare"

        async def close(self) -> None:
            await self.inner.close()

    async def bare_client(cfg: Config) -> Bare:
        return Bare(new_client(cfg))

    monkeypatch.setattr(inspection, "open_client", bare_client)
    code, _, err = cli("inspect")
    assert code == 2
    assert "backend 'bare' has no admin API" in err


# --------------------------------------------------------------------------- errors


def test_unknown_config_key_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rocksmq:\n  pth: /nowhere\n", encoding="utf-8")
    for argv in (["inspect", "--config", str(bad)], ["--config", str(bad), "demo"]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("error: ")
        assert "rocksmq.pth" in lines[0] and "rocksmq.path" in lines[0]
        assert out == ""


def test_bad_environment_variable_exits_2(
    config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MSGSTREAM_ROCKSMQ_PTH", "x")
    assert main(["inspect", "--config", str(config)]) == 2
    assert "MSGSTREAM_ROCKSMQ_PTH" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("somewhere", "expected 'earliest', 'latest', positions JSON or @FILE"),
        ("[{", "positions are not valid JSON"),
        ('{"channel": "a"}', "lacks the key 'msg_id'"),
        ('{"channel": "a", "msg_id": "%%%"}', "not valid base64"),
        ("[]", "the positions list is empty"),
        ('[{"channel": "zz", "msg_id": "cgAAAAAAAAAB"}]', "channels not consumed"),
        ("@/nonexistent/positions.json", "cannot read positions file"),
    ],
)
def test_bad_from_exits_2(cli: Cli, value: str, message: str) -> None:
    code, out, err = cli("consume", "--channel", "a", "--from", value)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("error: --from")
    assert message in line
    assert out == ""


def test_tt_from_must_cover_every_channel(cli: Cli) -> None:
    position = '{"channel": "a", "msg_id": "cgAAAAAAAAAB"}'
    code, _, err = cli("consume", "--channel", "a", "--channel", "b", "--tt", "--from", position)
    assert code == 2
    assert "no position for channel(s) ['b']" in err


def test_foreign_position_exits_2(cli: Cli) -> None:
    memory_id = '{"channel": "a", "msg_id": "bQAAAAAAAAAB"}'  # a memory-backend MessageID
    code, _, err = cli("consume", "--from", memory_id, "--max-packs", "1")
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("error: MessageID belongs to backend 'memory'")


@pytest.mark.parametrize("command", ["produce", "consume", "inspect"])
@pytest.mark.parametrize("name", ["bad name", "x/y", "..", ""])
def test_invalid_channel_name_exits_2(cli: Cli, command: str, name: str) -> None:
    extra = ["--count", "1"] if command == "produce" else []
    code, _, err = cli(command, "--channel", name, *extra)
    assert code == 2
    assert "argument --channel" in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["consume"]) == 2  # no --channel and no positions
    assert "--channel is required" in capsys.readouterr().err
    assert main(["produce", "--channel", "a", "--count", "-1"]) == 2
    assert main(["--help"]) == 0
    assert "produce" in capsys.readouterr().out


def test_console_script_entry_point(config: Path, tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("msgstream")
    assert script.exists(), "run `pip install -e .` to install the console script"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSGSTREAM_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    run = subprocess.run(
        [str(script), "produce", "--config", str(config), "--channel", "cs", "--count", "3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("produced: messages=3 channels=1 ")
    bad = subprocess.run(
        [str(script), "consume", "--config", str(config), "--channel", "cs", "--from", "[x"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: --from: positions are not valid JSON")


def test_consuming_a_channel_that_does_not_exist_exits_2_and_creates_nothing(cli: Cli) -> None:
    code, _, err = cli("consume", "--channel", "typo-channel", "--idle-timeout", "0.2")
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        "error: channel 'typo-channel' does not exist on backend 'rocksmq' "
        "(--wait-for-channels waits for it)"
    )
    assert "typo-channel" not in cli.ok("inspect")


def test_a_misspelt_channel_is_answered_with_the_closest_names(cli: Cli, tmp_path: Path) -> None:
    """consume, inspect and a consume resumed from positions (a seek) on a channel that
    does not exist: each names the existing channels closest to it."""
    cli.ok("produce", "--channel", "orders-1", "--channel", "payments", "--count", "4")
    hint = "; did you mean 'orders-1'?"
    missing = "error: channel 'orders-l' does not exist on backend 'rocksmq'"
    code, _, err = cli("consume", "--channel", "orders-l", "--idle-timeout", "0.2")
    assert (code, err.strip().splitlines()[-1]) == (
        2,
        f"{missing}{hint} (--wait-for-channels waits for it)",
    )
    code, out, err = cli("inspect", "--channel", "orders-l")
    assert (code, out, err.strip()) == (2, "", f"{missing}{hint}")
    saved = tmp_path / "positions.json"
    cli.ok("consume", "--channel", "orders-1", "--from", "earliest", "--max-packs", "1",
           "--save-positions", str(saved))  # fmt: skip
    moved = tmp_path / "moved.json"
    moved.write_text(saved.read_text().replace('"orders-1"', '"orders-l"'))
    code, _, err = cli("consume", "--from", f"@{moved}", "--max-packs", "1")
    assert code == 2
    assert err.strip().splitlines()[-1].startswith(f"{missing}{hint}")
    code, _, err = cli(
        "consume", "--channel", "orders-l", "--wait-for-channels", "--idle-timeout", "0.2"
    )
    assert code == 0
    assert (
        "warning: channel 'orders-l' does not exist yet; waiting for it (did you mean 'orders-1'?)"
    ) in err


def test_consume_can_wait_for_a_channel_to_be_created(cli: Cli) -> None:
    code, _, err = cli(
        "consume", "--channel", "later", "--wait-for-channels", "--idle-timeout", "0.3"
    )
    assert code == 0
    assert "warning: channel 'later' does not exist yet; waiting for it" in err


# --------------------------------------------------------------------------- store faults


def test_inspect_never_creates_a_store(tmp_path: Path, cli: Cli) -> None:
    typo = tmp_path / "typo"
    config_file = tmp_path / "typo.yaml"
    config_file.write_text(f"rocksmq:\n  path: {typo}\n", encoding="utf-8")
    code, out, err = Cli(config_file, cli.capsys)("inspect")
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        f"error: rocksmq store at '{typo}': no rocksmq store here (nothing was created; "
        "check the path)"
    )
    assert out == ""
    assert not typo.exists()


def test_an_unusable_store_path_exits_1_with_one_line(tmp_path: Path, cli: Cli) -> None:
    file = tmp_path / "file"
    file.write_text("x", encoding="utf-8")
    config_file = tmp_path / "file.yaml"
    config_file.write_text(f"rocksmq:\n  path: {file}\n", encoding="utf-8")
    code, _, err = Cli(config_file, cli.capsys)("produce", "--channel", "a", "--count", "1")
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line == (
        f"error: rocksmq store at '{file}': this is a file, not a directory (rocksmq.path "
        "names a directory)"
    )


def test_an_unreachable_broker_exits_1(tmp_path: Path, cli: Cli) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config_file = tmp_path / "kafka.yaml"
    config_file.write_text(
        f"mq:\n  type: kafka\nkafka:\n  brokers: 127.0.0.1:{port}\n"
        "msgstream:\n  operation_timeout_s: 1\n",
        encoding="utf-8",
    )
    code, _, err = Cli(config_file, cli.capsys)("produce", "--channel", "a", "--count", "1")
    assert code == 1
    assert err.strip().splitlines()[-1].startswith(f"error: kafka at 127.0.0.1:{port}")


def test_sigterm_stops_consume_cleanly_saving_positions(config: Path, tmp_path: Path) -> None:
    """Containers and systemd stop with SIGTERM: the command winds down as on Ctrl-C,
    writes the positions it promised and its summary, and exits 143."""
    script = Path(sys.executable).with_name("msgstream")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSGSTREAM_")}
    base = [str(script), "--config", str(config)]
    subprocess.run([*base, "produce", "--channel", "t", "--count", "5", "--no-ticks",
                    "--no-create-collection"],
                   check=True, env=env, capture_output=True, timeout=60)  # fmt: skip
    saved = tmp_path / "positions.json"
    consumer = subprocess.Popen(
        [*base, "consume", "--channel", "t", "--from", "earliest", "--json",
         "--save-positions", str(saved)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert consumer.stdout is not None
    lines = [consumer.stdout.readline() for _ in range(5)]  # all five consumed, then it waits
    consumer.send_signal(signal.SIGTERM)
    out, err = consumer.communicate(timeout=60)
    assert consumer.returncode == 143, err
    assert [orjson.loads(line)["msgs"][0]["row_ids"] for line in lines] == [[i] for i in range(5)]
    assert out == ""
    tail = err.strip().splitlines()
    assert tail[-1] == "terminated"
    assert (
        tail[-2].startswith("consumed: packs=5 messages=5 ") and "stopped=interrupted" in tail[-2]
    )
    saved_positions = positions_from_json(saved.read_text(encoding="utf-8"))
    assert [p.to_dict() for p in saved_positions] == orjson.loads(lines[-1])["end_positions"]


def test_produce_json_summary(cli: Cli) -> None:
    out = cli.ok("produce", "--channel", "j0", "--channel", "j1", "--count", "30", "--batch", "7",
                 "--json")  # fmt: skip
    summary = orjson.loads(out)
    assert set(summary) == {
        "messages", "batches", "skipped", "skipped_lines", "channels", "ticks", "seconds",
        "msgs_per_s",
    }  # fmt: skip
    assert (summary["messages"], summary["batches"], summary["channels"]) == (30, 5, ["j0", "j1"])
    assert (summary["skipped"], summary["skipped_lines"]) == (0, [])
    assert summary["ticks"] >= 1 and summary["seconds"] > 0
