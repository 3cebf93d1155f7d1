"""MessageIDs of the in-process backends: ints tagged with their backend."""

from __future__ import annotations

import pickle

import pytest

from msgstream import ForeignMessageIdError, InvalidPositionError
from msgstream.backends.log_client.client import LogMessageID, MemoryMessageID, RocksmqMessageID
from msgstream.contract.backend import message_id_bytes
from msgstream.contract.tagged_id import MessageIdRange, tagged_ids


def test_ids_are_tagged_ints_that_round_trip() -> None:
    rocks = LogMessageID.for_backend("rocksmq")(5)
    assert type(rocks) is RocksmqMessageID and int(rocks) == 5 and rocks.value == 5
    assert rocks.to_bytes() == b"r" + (5).to_bytes(8, "big")
    assert RocksmqMessageID.parse(rocks.to_bytes()) == rocks
    negative = LogMessageID.for_backend("memory")(-1)
    assert MemoryMessageID.parse(negative.to_bytes()) == negative
    assert repr(rocks) == "LogMessageID(rocksmq:5)"


def test_order_and_equality_within_one_backend() -> None:
    a, b = RocksmqMessageID(3), RocksmqMessageID(4)
    assert a < b and a <= b and b > a and b >= a and a != b
    assert a == RocksmqMessageID(3) and hash(a) == hash(RocksmqMessageID(3))
    assert sorted([b, a]) == [a, b]


def test_ids_of_different_backends_never_mix() -> None:
    rocks, memory = RocksmqMessageID(3), MemoryMessageID(3)
    assert rocks != memory and not rocks == memory  # noqa: SIM201
    for compare in (
        lambda: rocks < memory,
        lambda: rocks <= memory,
        lambda: rocks > memory,
        lambda: rocks >= memory,
    ):
        with pytest.raises(ForeignMessageIdError, match="'memory', not to 'rocksmq'"):
            compare()
    with pytest.raises(ForeignMessageIdError):
        RocksmqMessageID.parse(memory.to_bytes())
    with pytest.raises(TypeError, match="cannot order"):
        _ = rocks < 4


@pytest.mark.parametrize("data", [b"", b"r", b"r" + bytes(7), b"x" + bytes(8), b"r" + bytes(9)])
def test_malformed_bytes_are_rejected(data: bytes) -> None:
    with pytest.raises(InvalidPositionError, match="is not a rocksmq MessageID"):
        RocksmqMessageID.parse(data)


def test_unknown_backend_name() -> None:
    with pytest.raises(ValueError, match="no local backend called 'kafka'"):
        LogMessageID.for_backend("kafka")(1)


def test_a_kafka_id_is_named_as_foreign() -> None:
    kafka_id = b"k" + (3).to_bytes(8, "big")
    with pytest.raises(ForeignMessageIdError, match="'kafka'"):
        RocksmqMessageID.parse(kafka_id)


def test_message_id_bytes_names_the_owner_or_refuses_a_non_id() -> None:
    rocks = LogMessageID.for_backend("rocksmq")(7)
    assert message_id_bytes("rocksmq", rocks) == rocks.to_bytes()
    with pytest.raises(ForeignMessageIdError, match="'rocksmq'"):
        message_id_bytes("kafka", rocks)
    with pytest.raises(InvalidPositionError, match="is not a MessageID"):
        message_id_bytes("kafka", object())


def test_a_run_of_ids_acts_as_the_list_of_them() -> None:
    run = MessageIdRange(RocksmqMessageID, range(5, 10))
    ids = [RocksmqMessageID(n) for n in range(5, 10)]
    assert len(run) == 5 and list(run) == ids and run == ids and ids == run
    assert run[0] == ids[0] and run[-1] == ids[-1] and type(run[2]) is RocksmqMessageID
    assert run[1:3] == ids[1:3] and isinstance(run[1:3], MessageIdRange)
    assert list(reversed(run)) == ids[::-1]
    assert RocksmqMessageID(7) in run and RocksmqMessageID(10) not in run
    assert MemoryMessageID(7) not in run and 7 not in run
    assert run.index(RocksmqMessageID(8)) == 3
    assert run != ids[:4] and run != [MemoryMessageID(n) for n in range(5, 10)]
    assert run == MessageIdRange(RocksmqMessageID, range(5, 10))
    assert run != MessageIdRange(MemoryMessageID, range(5, 10))
    assert MessageIdRange(RocksmqMessageID, range(3, 3)) == []
    assert run + ids[:1] == [*ids, ids[0]] and ids[:1] + run == [ids[0], *ids]
    assert run[:2] + run[3:] == [ids[0], ids[1], ids[3], ids[4]]
    with pytest.raises(TypeError):
        run + "ab"
    with pytest.raises(IndexError):
        run[5]
    with pytest.raises(TypeError):
        hash(run)
    assert pickle.loads(pickle.dumps(run)) == run
    assert repr(run[:2]) == "[LogMessageID(rocksmq:5), LogMessageID(rocksmq:6)]"
    assert repr(run) == "[LogMessageID(rocksmq:5), ... LogMessageID(rocksmq:9)] (5 ids)"


def test_offsets_become_a_run_only_when_they_count_up_one_by_one() -> None:
    run = tagged_ids(RocksmqMessageID, [4, 5, 6])
    assert isinstance(run, MessageIdRange) and run == [RocksmqMessageID(n) for n in (4, 5, 6)]
    for offsets in ([4, 6, 7], [4, 4, 5], [5, 4], (7, 9)):
        ids = tagged_ids(RocksmqMessageID, offsets)
        assert type(ids) is list and ids == [RocksmqMessageID(n) for n in offsets]
    assert tagged_ids(RocksmqMessageID, []) == [] and tagged_ids(RocksmqMessageID, (3,)) == [
        RocksmqMessageID(3)
    ]
