"""The batcher's checkpoint file and the slice offsets (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msgstream import InvalidPositionError, MsgPosition, positions_to_json
from msgstream.bridge_spark import (
    BatchMark,
    CheckpointError,
    CheckpointState,
    OptionError,
    SliceOffset,
)
from msgstream.bridge_spark.data.checkpoint import check_matches, load_checkpoint, save_checkpoint
from msgstream.bridge_spark.data.offsets import parse_start

CHANNELS = ("a", "b")


def mark(batch_id: int, tick: int) -> BatchMark:
    return BatchMark(
        batch_id, tick, (MsgPosition("a", b"\x01", "s", tick), MsgPosition("b", b"\x02", "s", tick))
    )


def test_round_trip_and_atomic_replacement(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "ck.json"
    assert load_checkpoint(path) is None
    state = CheckpointState(CHANNELS, "c", committed=mark(3, 100), pending=mark(4, 200))
    save_checkpoint(path, state)
    assert load_checkpoint(path) == state
    assert state.next_batch_id == 4
    done = CheckpointState(CHANNELS, "c", committed=mark(4, 200))
    save_checkpoint(path, done)
    assert load_checkpoint(path) == done
    assert done.next_batch_id == 5
    assert CheckpointState(CHANNELS, "c").next_batch_id == 0
    assert [p.name for p in path.parent.iterdir()] == ["ck.json"]  # no temporary left behind
    check_matches(done, path, CHANNELS, "c")
    with pytest.raises(CheckpointError) as caught:
        check_matches(done, path, CHANNELS, "other")
    assert str(caught.value) == f"checkpoint {path}: was written for collection 'c', not 'other'"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("[]", "is not a msgstream-spark-batcher checkpoint"),
        ('{"format": "msgstream-spark-batcher", "version": 9}',
         "has version 9; this bridge reads 1"),
        ('{"format": "msgstream-spark-batcher", "version": 1, "channels": "a", "collection": "c"}',
         "'channels' must be a list of channel names"),
        ('{"format": "msgstream-spark-batcher", "version": 1, "channels": [], "collection": "c",'
         ' "committed": {"batch_id": "x", "end_ts": 1, "positions": []}}',
         "committed.batch_id must be an int >= -1, got 'x'"),
        ('{"format": "msgstream-spark-batcher", "version": 1, "channels": [], "collection": "c",'
         ' "pending": {"batch_id": 1, "end_ts": 1, "positions": [{"channel": "a"}]}}',
         "pending.positions: position {'channel': 'a'} lacks the key 'msg_id'"),
    ],
)  # fmt: skip
def test_bad_checkpoints_name_the_path_and_the_problem(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "ck.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(path)
    assert str(caught.value) == f"checkpoint {path}: {problem}"


def test_unwritable_checkpoint_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(CheckpointError) as caught:
        save_checkpoint(blocker / "ck.json", CheckpointState(CHANNELS, "c"))
    assert str(caught.value).startswith(f"checkpoint {blocker / 'ck.json'}: cannot be written: ")


def test_slice_offsets_round_trip_through_spark_and_positions() -> None:
    offset = SliceOffset(42, {"a": b"\x00\x01", "b": None})
    data = json.loads(json.dumps(offset.to_spark()))
    assert data == {"tick": 42, "positions": {"a": "AAE=", "b": None}}
    assert SliceOffset.from_spark(data, CHANNELS) == offset
    assert offset.to_positions() is None  # a channel at its beginning has no MessageID
    full = SliceOffset(7, {"a": b"\x05", "b": b"\x06"})
    positions = full.to_positions("sub")
    assert positions == [MsgPosition("a", b"\x05", "sub", 7), MsgPosition("b", b"\x06", "sub", 7)]
    assert SliceOffset.from_positions(positions, CHANNELS) == full
    with pytest.raises(InvalidPositionError) as caught:
        SliceOffset.from_spark(data, ["a"])
    assert str(caught.value) == (
        "offset cover channels ['a', 'b'], but the job reads ['a'] (missing [], not read ['b'])"
    )
    uneven = [MsgPosition("a", b"\x05", "", 1), MsgPosition("b", b"\x06", "", 2)]
    with pytest.raises(InvalidPositionError, match="one common time tick, got a=1, b=2"):
        SliceOffset.from_positions(uneven, CHANNELS)


def test_examined_counts_travel_with_offsets_and_positions() -> None:
    """What a slice had read past its position goes into Spark's offset JSON (only when
    known, so older offsets keep their text) and to and from a TtMsgStream's positions."""
    offset = SliceOffset(7, {"a": b"\x05", "b": b"\x06"}, {"a": 3})
    data = json.loads(json.dumps(offset.to_spark()))
    assert data == {"tick": 7, "positions": {"a": "BQ==", "b": "Bg=="}, "examined": {"a": 3}}
    assert SliceOffset.from_spark(data, CHANNELS) == offset
    positions = offset.to_positions("sub")
    assert positions == [
        MsgPosition("a", b"\x05", "sub", 7, examined=3),
        MsgPosition("b", b"\x06", "sub", 7),
    ]
    assert SliceOffset.from_positions(positions, CHANNELS) == offset
    for bad, needle in (
        ([], "'examined' must be an object"),
        ({"c": 1}, "'examined' names channel 'c', which the job does not read"),
        ({"a": -1}, "'examined' of channel 'a' must be an int >= 0, got -1"),
        ({"a": True}, "'examined' of channel 'a' must be an int >= 0, got True"),
    ):
        with pytest.raises(InvalidPositionError, match=needle):
            SliceOffset.from_spark({**data, "examined": bad}, CHANNELS)
    with pytest.raises(InvalidPositionError, match="optionally 'examined'"):
        SliceOffset.from_spark({**data, "extra": 1}, CHANNELS)


def test_starting_positions_parse(tmp_path: Path) -> None:
    assert parse_start(" Earliest ", CHANNELS) == "earliest"
    assert parse_start("latest", CHANNELS) == "latest"
    full = SliceOffset(7, {"a": b"\x05", "b": b"\x06"})
    positions = full.to_positions()
    assert positions is not None
    text = positions_to_json(positions)
    assert parse_start(text, CHANNELS) == full
    saved = tmp_path / "positions.json"
    saved.write_text(text, encoding="utf-8")
    assert parse_start(f"@{saved}", CHANNELS) == full
    assert parse_start(json.dumps(full.to_spark()), CHANNELS) == full
    with pytest.raises(OptionError) as caught:
        parse_start("soonest", CHANNELS)
    assert str(caught.value) == (
        "option 'startingPositions': expected earliest, latest, JSON positions or @file, "
        "got 'soonest'"
    )
    with pytest.raises(OptionError) as caught:
        parse_start(f"@{tmp_path / 'missing.json'}", CHANNELS)
    assert str(caught.value) == (
        f"option 'startingPositions': cannot read {tmp_path / 'missing.json'}: "
        "No such file or directory"
    )
