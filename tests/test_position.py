"""MsgPosition checkpoints and SubscriptionPosition."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from msgstream.errors import InvalidPositionError, MsgStreamError
from msgstream.wire.position import (
    MsgPosition,
    SubscriptionPosition,
    positions_from_json,
    positions_to_json,
)

positions = st.builds(
    MsgPosition,
    channel=st.text(min_size=1, max_size=40),
    msg_id=st.binary(max_size=64),
    msg_group=st.text(max_size=20),
    timestamp=st.integers(min_value=0, max_value=2**64 - 1),
    examined=st.integers(min_value=0, max_value=2**31),
)

GOOD: dict[str, Any] = {"channel": "ch-1", "msg_id": "AAH/", "msg_group": "g", "timestamp": 42}


def _raises(data: Any, *needles: str) -> InvalidPositionError:
    with pytest.raises(InvalidPositionError) as info:
        MsgPosition.from_dict(data)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))
    return info.value


# --------------------------------------------------------------------------- values


def test_to_dict_exact() -> None:
    pos = MsgPosition("ch-1", b"\x00\x01\xff", "g", 42)
    assert pos.to_dict() == GOOD
    assert list(pos.to_dict()) == ["channel", "msg_id", "msg_group", "timestamp"]
    assert MsgPosition.from_dict(GOOD) == pos


def test_defaults_and_frozen() -> None:
    pos = MsgPosition("c", b"\x07")
    assert pos.msg_group == ""
    assert pos.timestamp == 0
    assert pos.to_dict() == {"channel": "c", "msg_id": "Bw==", "msg_group": "", "timestamp": 0}
    with pytest.raises(AttributeError):
        pos.timestamp = 5  # type: ignore[misc]
    assert hash(pos) == hash(MsgPosition("c", b"\x07"))


def test_from_dict_optional_keys_default() -> None:
    pos = MsgPosition.from_dict({"channel": "c", "msg_id": ""})
    assert pos == MsgPosition("c", b"", "", 0)
    assert type(pos.msg_id) is bytes


def test_examined_is_written_only_when_known() -> None:
    """A barrier's end position says how many messages its cut had read; other positions
    (and those written before the field) keep their old shape and mean 'not known'."""
    pos = MsgPosition("ch-1", b"\x00\x01\xff", "g", 42, examined=3)
    assert pos.to_dict() == {**GOOD, "examined": 3}
    assert MsgPosition.from_json(pos.to_json()) == pos
    assert MsgPosition.from_dict(GOOD).examined == 0
    for bad in (-1, "3", 2.5, True, None):
        _raises({**GOOD, "examined": bad}, "'examined'", "channel 'ch-1'", "int >= 0")


def test_timestamp_bounds() -> None:
    top = MsgPosition.from_dict({**GOOD, "timestamp": 2**64 - 1})
    assert top.timestamp == 2**64 - 1
    assert MsgPosition.from_json(top.to_json()) == top
    assert MsgPosition.from_dict({**GOOD, "timestamp": 0}).timestamp == 0


def test_to_json_exact() -> None:
    pos = MsgPosition("ch-1", b"\x00\x01\xff", "g", 42)
    text = pos.to_json()
    assert isinstance(text, str)
    assert text == '{"channel":"ch-1","msg_id":"AAH/","msg_group":"g","timestamp":42}'
    assert MsgPosition.from_json(text) == pos
    assert MsgPosition.from_json(text.encode()) == pos


@given(positions)
def test_dict_round_trip(pos: MsgPosition) -> None:
    data = pos.to_dict()
    assert isinstance(data["msg_id"], str)
    back = MsgPosition.from_dict(data)
    assert back == pos
    assert type(back.msg_id) is bytes
    assert back.msg_id == pos.msg_id


@given(positions)
def test_json_round_trip(pos: MsgPosition) -> None:
    text = pos.to_json()
    assert orjson.loads(text) == pos.to_dict()
    assert MsgPosition.from_json(text) == pos


@given(st.lists(positions, max_size=6))
def test_positions_list_round_trip(items: list[MsgPosition]) -> None:
    text = positions_to_json(items)
    assert isinstance(text, str)
    assert orjson.loads(text) == [p.to_dict() for p in items]
    assert positions_from_json(text) == items
    assert positions_from_json(text.encode()) == items


def test_positions_from_json_accepts_a_single_object() -> None:
    pos = MsgPosition("a", b"\x01\x02", "s", 9)
    assert positions_from_json(pos.to_json()) == [pos]
    assert positions_from_json("[]") == []
    assert positions_to_json([]) == "[]"


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("data", [[GOOD], "text", None, 5, b"raw"])
def test_not_an_object(data: Any) -> None:
    err = _raises(data, "a position must be a JSON object", repr(data))
    assert isinstance(err, MsgStreamError)
    assert isinstance(err, ValueError)


@pytest.mark.parametrize("key", ["channel", "msg_id"])
def test_missing_key(key: str) -> None:
    data = {k: v for k, v in GOOD.items() if k != key}
    _raises(data, "lacks the key", repr(key))


@pytest.mark.parametrize("channel", ["", 5, None, ["c"], b"c"])
def test_bad_channel(channel: Any) -> None:
    _raises({**GOOD, "channel": channel}, "'channel' must be a non-empty string")


@pytest.mark.parametrize("msg_id", [5, None, b"AAH/", ["AA=="], {"o": 1}])
def test_msg_id_not_a_string(msg_id: Any) -> None:
    _raises({**GOOD, "msg_id": msg_id}, "'msg_id' must be a base64 string")


@pytest.mark.parametrize("msg_id", ["!!!!", "abc", "AA=", "A===", "AA==AA", "é", "AA AA", "AA\n=="])
def test_msg_id_bad_base64(msg_id: str) -> None:
    _raises({**GOOD, "msg_id": msg_id}, "not valid base64", "'ch-1'", repr(msg_id))


@pytest.mark.parametrize(
    "timestamp", [-1, -(2**63), 2**64, 2**70, "5", 1.5, True, False, None, [1]]
)
def test_bad_timestamp(timestamp: Any) -> None:
    _raises({**GOOD, "timestamp": timestamp}, "'timestamp'", "'ch-1'", "must be an int >= 0")


@pytest.mark.parametrize("group", [5, None, ["g"], {"a": 1}])
def test_bad_msg_group(group: Any) -> None:
    _raises({**GOOD, "msg_group": group}, "'msg_group' must be a string", repr(group))


@pytest.mark.parametrize("text", ["", "{", "not json", b"\xff\xfe", '{"channel": "c",}', "[1, 2"])
def test_from_json_not_json(text: str | bytes) -> None:
    with pytest.raises(InvalidPositionError, match="position is not valid JSON"):
        MsgPosition.from_json(text)
    with pytest.raises(InvalidPositionError, match="positions are not valid JSON"):
        positions_from_json(text)


def test_from_json_valid_json_wrong_shape() -> None:
    with pytest.raises(InvalidPositionError, match="must be a JSON object"):
        MsgPosition.from_json("[1, 2]")
    with pytest.raises(InvalidPositionError, match="lacks the key 'msg_id'"):
        MsgPosition.from_json('{"channel": "c"}')


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("5", "positions must be a JSON list, got int"),
        ('"x"', "positions must be a JSON list, got str"),
        ("null", "positions must be a JSON list, got NoneType"),
        ("[1]", "a position must be a JSON object, got 1"),
        (f'[{orjson.dumps(GOOD).decode()}, {{"channel": "c"}}]', "lacks the key 'msg_id'"),
        ('[{"channel": "c", "msg_id": "%%"}]', "not valid base64"),
    ],
)
def test_positions_from_json_bad(text: str, needle: str) -> None:
    with pytest.raises(InvalidPositionError) as info:
        positions_from_json(text)
    assert needle in str(info.value)


# --------------------------------------------------------------------------- subscription


def test_subscription_positions() -> None:
    assert [p.name for p in SubscriptionPosition] == ["EARLIEST", "LATEST", "UNKNOWN"]
    assert SubscriptionPosition.EARLIEST.value == "earliest"
    assert SubscriptionPosition.LATEST.value == "latest"
    assert SubscriptionPosition.UNKNOWN.value == "unknown"
    assert SubscriptionPosition("latest") is SubscriptionPosition.LATEST
    assert SubscriptionPosition.EARLIEST != SubscriptionPosition.LATEST
    with pytest.raises(ValueError, match="'newest' is not a valid SubscriptionPosition"):
        SubscriptionPosition("newest")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 1000 + "]" * 1000, "a position must be a JSON object, got [[[[...]]]]"),
        (
            '{"channel": ' + "[" * 1000 + "]" * 1000 + ', "msg_id": ""}',
            "position 'channel' must be a non-empty string: {'channel': [[[...]]], 'msg_id': ''}",
        ),
    ],
)
def test_deeply_nested_json_is_an_invalid_position(text: str, message: str) -> None:
    """Found by fuzzing: the error message's repr of 1,000 nested lists exceeded Python's
    recursion limit (RecursionError); it is shortened now."""
    with pytest.raises(InvalidPositionError) as info:
        positions_from_json(text)
    assert str(info.value) == message


def test_a_huge_msg_id_is_shortened_in_the_error() -> None:
    with pytest.raises(InvalidPositionError) as info:
        MsgPosition.from_dict({"channel": "ch", "msg_id": "!" * 10**6})
    message = str(info.value)
    assert message.startswith("position 'msg_id' of channel 'ch' is not valid base64: '!!!")
    assert len(message) < 200
