"""Batch decoding (``decode_batch``) and the messages its plans build, against ``decode``.

Every payload must get exactly ``decode``'s verdict (the same error type and message, or
an equal message), whether it is decoded in full, through a cached plan one by one, or
in a batch checked column-wise; and a message built lazily from a plan must behave as
the decoded one in every observable way.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import msgstream.wire.codec as codec
from msgstream.errors import CodecError, DecodeError, UnknownTypeCodeError
from msgstream.wire.batch_encoder import encode_batch, encode_one
from msgstream.wire.codec import MessageRegistry, decode, decode_batch, encode
from msgstream.wire.messages import (
    BUILTIN_TYPES,
    CreatePartitionMsg,
    DeleteMsg,
    DropCollectionMsg,
    DropPartitionMsg,
    InsertMsg,
    TimeTickMsg,
    TsMsg,
)
from msgstream.wire.plans import DeletePlan, InsertPlan, ReadyPlan, StaticPlan
from msgstream.wire.position import MsgPosition
from msgstream.wire.schema import DataType, FieldData
from test_codec import (
    NASTY_VALUES,
    PAYLOADS,
    NoteMsg,
    build_payload,
    rebuild,
    split_payload,
)

WHERE = ("ch", "sub")


def numeric_insert(msg_id: int = 1, rows: int = 3) -> InsertMsg:
    return InsertMsg(
        msg_id=msg_id,
        timestamp=500 + msg_id,
        source_id=4,
        collection_name="c",
        partition_name="p",
        row_ids=np.arange(rows) + 10,
        row_timestamps=np.arange(rows) + 400 + msg_id,
        fields=[
            FieldData("pk", DataType.INT64, np.arange(rows)),
            FieldData("flag", DataType.BOOL, [i % 2 == 0 for i in range(rows)]),
            FieldData("f", DataType.FLOAT, np.linspace(0, 1, rows), valid=[True] * rows),
            FieldData("i8", DataType.INT8, np.arange(rows) % 100),
            FieldData("vec", DataType.FLOAT_VECTOR, np.ones((rows, 4), np.float32), dim=4),
        ],
    )


def plannable() -> list[TsMsg]:
    return [
        TimeTickMsg(msg_id=0, timestamp=10, source_id=1),
        DeleteMsg(msg_id=3, timestamp=30, collection_name="c", primary_keys=[1]),
        DeleteMsg(
            msg_id=4,
            timestamp=40,
            source_id=-2,
            collection_name="c",
            partition_name="q",
            primary_keys=[5, 6, 7],
            row_timestamps=[35, 41, 38],
        ),
        numeric_insert(),
        DropCollectionMsg(msg_id=6, timestamp=60, collection_name="c", collection_id=9),
        CreatePartitionMsg(msg_id=7, timestamp=70, collection_name="c", partition_name="p"),
        DropPartitionMsg(msg_id=8, timestamp=80, collection_name="c", partition_name="p"),
    ]


PLANNABLE = [encode(m) for m in plannable()]


def built(batch: codec.DecodedBatch, row: int, payload: bytes, at: bytes = b"id") -> TsMsg:
    return batch.plans[row].build(
        batch.msg_ids[row], batch.stamps[row], batch.sources[row], payload, at, WHERE
    )


def assert_same(mine: TsMsg, theirs: TsMsg) -> None:
    """``mine`` (built from a plan) behaves as ``theirs`` (decoded)."""
    assert type(mine) is type(theirs)
    assert mine.header() == theirs.header()
    assert mine.size == theirs.size
    assert (mine.begin_ts, mine.end_ts) == (theirs.begin_ts, theirs.end_ts)
    assert mine == theirs
    assert mine.hash_keys == theirs.hash_keys == []
    for name, value in theirs.body_fields().items():
        assert_same_value(getattr(mine, name), value)


def assert_same_value(mine: Any, theirs: Any) -> None:
    if isinstance(theirs, np.ndarray):
        assert isinstance(mine, np.ndarray)
        assert (mine.dtype, mine.shape, mine.flags.writeable) == (
            theirs.dtype,
            theirs.shape,
            theirs.flags.writeable,
        )
        assert np.array_equal(mine, theirs)
    elif isinstance(theirs, list) and theirs and isinstance(theirs[0], FieldData):
        assert len(mine) == len(theirs)
        for a, b in zip(mine, theirs, strict=True):
            assert (a.name, a.dtype, a.dim) == (b.name, b.dtype, b.dim)
            assert_same_value(a.values, b.values)
            assert_same_value(a.valid, b.valid)
    else:
        assert type(mine) is type(theirs) and mine == theirs


def verdicts(payloads: list[bytes], registry: MessageRegistry, limit: int) -> list[Any]:
    """What ``decode`` says of each payload: an error (type, text) or the message."""
    out: list[Any] = []
    for payload in payloads:
        try:
            out.append(decode(payload, registry, limit))
        except CodecError as exc:
            out.append((type(exc), str(exc)))
    return out


def assert_batch_agrees(
    payloads: list[bytes], registry: MessageRegistry, limit: int = codec.DEFAULT_MAX_MESSAGE_BYTES
) -> None:
    expected = verdicts(payloads, registry, limit)
    batch = decode_batch(payloads, registry, limit)
    bad = {index: (type(exc), str(exc)) for index, exc in batch.bad}
    row = 0
    for index, verdict in enumerate(expected):
        if isinstance(verdict, tuple):
            assert bad.get(index) == verdict
            continue
        assert index not in bad
        assert batch.ts[row] == verdict.end_ts
        assert batch.kinds[row] == batch.plans[row].kind
        mine = built(batch, row, payloads[index])
        if isinstance(batch.plans[row], ReadyPlan):
            assert row in batch.ready
            assert mine is batch.plans[row].msg  # type: ignore[attr-defined]
        else:
            assert mine.position == MsgPosition("ch", b"id", "sub", verdict.timestamp)
        assert_same(mine, verdict)
        row += 1
    assert row == len(batch.plans) == len(batch.ts) == len(batch.kinds) == len(batch.msg_ids)


def test_every_sample_alone_and_together_cold_and_cached() -> None:
    registry = MessageRegistry(REGISTRY_TYPES)
    for payload in PAYLOADS + PLANNABLE:
        assert_batch_agrees([payload], registry)
        assert_batch_agrees([payload], registry)
    assert_batch_agrees(PAYLOADS + PLANNABLE, registry)
    assert_batch_agrees(PLANNABLE * 3, registry)


def test_plannable_bodies_get_plans_and_a_batch_of_them_is_checked_column_wise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = MessageRegistry(BUILTIN_TYPES)
    first = decode_batch(PLANNABLE, registry)
    assert [type(p) for p in first.plans] == [
        StaticPlan,
        DeletePlan,
        DeletePlan,
        InsertPlan,
        StaticPlan,
        StaticPlan,
        StaticPlan,
    ]

    def no_full_decode(*args: Any) -> Any:
        raise AssertionError("a cached body was decoded in full")

    monkeypatch.setattr(codec, "_decode_each", no_full_decode)
    assert_batch_agrees(PLANNABLE, registry)


@pytest.mark.parametrize("index", range(len(PLANNABLE)))
def test_every_damaged_copy_of_a_cached_body_gets_decodes_verdict(index: int) -> None:
    """A payload whose body has a plan, but with any byte flipped, cut anywhere or an
    envelope that overstates its body: the column-wise checks must catch what decode
    does (the batch holds sound payloads too, so it is checked column-wise first)."""
    registry = MessageRegistry(BUILTIN_TYPES)
    decode_batch(PLANNABLE, registry)
    payload = PLANNABLE[index]
    fields, body, area = split_payload(payload)
    damaged = [payload[:cut] for cut in range(len(payload))]
    for i in range(len(payload)):
        flipped = bytearray(payload)
        flipped[i] ^= 0x41
        damaged.append(bytes(flipped))
    raw_body = orjson.dumps(body)
    for extra in (1, 2, 9):
        damaged.append(
            build_payload(
                fields[3],
                raw_body,
                area,
                msg_id=fields[4],
                timestamp=fields[5],
                begin_ts=fields[7],
                end_ts=fields[8],
                json_len=len(raw_body) + extra,
            )
        )
    for bad in damaged:
        assert_batch_agrees([*PLANNABLE, bad], registry)


def test_unplannable_bodies_are_decoded_in_full_every_time() -> None:
    registry = MessageRegistry(REGISTRY_TYPES)
    note = NoteMsg(msg_id=1, timestamp=2, text="x", blob=b"b")
    strings = DeleteMsg(msg_id=2, timestamp=3, collection_name="c", primary_keys=["a"])
    payloads = [encode(note, registry), encode(strings, registry)]
    for _ in range(2):
        batch = decode_batch(payloads, registry)
        assert [type(p) for p in batch.plans] == [ReadyPlan, ReadyPlan]
        assert batch.ready == [0, 1]
    assert not registry.plans


def test_non_dml_rows_are_ordered_by_timestamp_even_if_the_envelope_says_otherwise() -> None:
    tick = build_payload(TimeTickMsg.MSG_TYPE, b"{}", timestamp=50, end_ts=70, begin_ts=40)
    delete = encode(DeleteMsg(msg_id=1, timestamp=60, collection_name="c", primary_keys=[1]))
    registry = MessageRegistry(BUILTIN_TYPES)
    for _ in range(2):
        batch = decode_batch([tick, delete], registry)
        assert batch.ts == [50, 60]
        assert_batch_agrees([tick, delete], registry)


def test_changing_the_registry_drops_its_plans() -> None:
    registry = MessageRegistry(BUILTIN_TYPES)
    delete = PLANNABLE[1]
    assert not decode_batch([delete], registry).bad
    assert registry.plans
    registry.unregister(DeleteMsg)
    assert not registry.plans
    batch = decode_batch([delete, delete], registry)
    assert [type(e) for _, e in batch.bad] == [UnknownTypeCodeError] * 2
    registry.register(NoteMsg)
    assert not registry.plans


def test_the_plan_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "PLAN_CACHE_SIZE", 4)
    registry = MessageRegistry(BUILTIN_TYPES)
    payloads = [encode(numeric_insert(1, rows)) for rows in range(1, 11)]
    for payload in payloads:
        assert_batch_agrees([payload], registry)
        assert len(registry.plans) <= 4
    assert_batch_agrees(payloads, registry)


def test_payloads_that_are_not_bytes_are_decoded_in_full() -> None:
    registry = MessageRegistry(BUILTIN_TYPES)
    payloads: list[Any] = [bytearray(PLANNABLE[1]), memoryview(PLANNABLE[3])]
    batch = decode_batch(payloads, registry)
    assert not batch.bad and [type(p) for p in batch.plans] == [ReadyPlan, ReadyPlan]
    assert not registry.plans


# --- random payloads, good and bad ----------------------------------------------------------

REGISTRY_TYPES = (*BUILTIN_TYPES, NoteMsg)


def mutated(payload: bytes, data: st.DataObject) -> bytes:
    kind = data.draw(st.sampled_from(["flip", "cut", "insert", "body", "area", "envelope"]))
    buf = bytearray(payload)
    if kind == "flip":
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] ^= data.draw(st.integers(1, 255))
    elif kind == "cut":
        del buf[data.draw(st.integers(0, len(buf) - 1)) :]
    elif kind == "insert":
        buf[data.draw(st.integers(0, len(buf))) : 0] = data.draw(st.binary(min_size=1, max_size=8))
    elif kind == "body":
        _, body, area = split_payload(payload)
        if isinstance(body, dict) and body:
            key = data.draw(st.sampled_from(sorted(body)))
            body = {**body, key: data.draw(st.sampled_from(NASTY_VALUES))}
        return rebuild(payload, body, area)
    elif kind == "area":
        _, body, area = split_payload(payload)
        return rebuild(payload, body, area[: data.draw(st.integers(0, max(len(area) - 1, 0)))])
    else:  # a valid checksum over a changed envelope field
        fields, body, area = split_payload(payload)
        return build_payload(
            data.draw(st.sampled_from([fields[3], 1, 3, 4242])),
            orjson.dumps(body),
            area,
            msg_id=fields[4],
            timestamp=fields[5],
            end_ts=data.draw(st.sampled_from([fields[8], fields[5] + 1])),
            version=data.draw(st.sampled_from([2, 2, 1])),
        )
    return bytes(buf)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_batches_get_decodes_verdict_cold_and_cached(data: st.DataObject) -> None:
    registry = MessageRegistry(REGISTRY_TYPES)
    pool = PAYLOADS + PLANNABLE
    payloads = []
    for _ in range(data.draw(st.integers(1, 12))):
        payload = data.draw(st.sampled_from(pool))
        payloads.append(mutated(payload, data) if data.draw(st.booleans()) else payload)
    assert_batch_agrees(payloads, registry)  # cold: plans made as bodies are met
    assert_batch_agrees(payloads, registry)  # cached
    limit = codec.DEFAULT_MAX_MESSAGE_BYTES
    good = [
        p for p, v in zip(payloads, verdicts(payloads, registry, limit), strict=True)
        if isinstance(v, TsMsg)
    ]  # fmt: skip
    assert_batch_agrees(good, registry)  # all sound: the column-wise path when all are planned
    assert_batch_agrees(payloads, registry, data.draw(st.sampled_from([60, 120, 200])))


# --- lazily built messages --------------------------------------------------------------------


def lazy(msg: TsMsg) -> tuple[TsMsg, TsMsg]:
    """(built from a cached plan, decoded) for ``msg``."""
    payload = encode(msg)
    registry = MessageRegistry(BUILTIN_TYPES)
    decode_batch([payload], registry)
    batch = decode_batch([payload], registry)
    assert not isinstance(batch.plans[0], ReadyPlan)
    theirs = decode(payload)
    theirs.position = MsgPosition("ch", b"id", "sub", theirs.timestamp)
    return built(batch, 0, payload), theirs


def deferred(msg: TsMsg) -> bool:
    """Whether ``msg`` has not built its arrays yet."""
    return msg.lazy_body is not None and "row_timestamps" not in vars(msg)


def test_a_lazy_message_builds_its_arrays_only_when_used() -> None:
    mine, theirs = lazy(plannable()[2])
    assert deferred(mine)
    assert (mine.begin_ts, mine.end_ts) == (35, 41)  # from the envelope
    assert (mine.msg_id, mine.timestamp, mine.source_id, mine.size) == (4, 40, -2, theirs.size)
    assert mine.position == theirs.position
    assert deferred(mine)
    keys = mine.primary_keys  # type: ignore[attr-defined]
    assert not deferred(mine)
    assert keys.tolist() == [5, 6, 7] and not keys.flags.writeable
    assert mine.row_timestamps.tolist() == [35, 41, 38]  # type: ignore[attr-defined]
    assert (mine.begin_ts, mine.end_ts) == (35, 41)
    assert_same(mine, theirs)


def test_lazy_one_row_inserts_encode_again_to_their_payloads() -> None:
    """A consumed one-row Insert sent on (its arrays not built yet) encodes to the bytes it
    was read from, alone (``encode_one``) and in a pack (``encode_batch``)."""
    originals = [
        InsertMsg(
            msg_id=i, timestamp=100 + i, source_id=3, collection_name="c", row_ids=[i],
            row_timestamps=[90 + i], fields=[FieldData("pk", DataType.INT64, np.array([7 * i]))],
        )
        for i in range(12)
    ]  # fmt: skip
    payloads = [encode(msg) for msg in originals]
    registry = MessageRegistry(BUILTIN_TYPES)
    decode_batch(payloads, registry)  # the bodies' plans are cached: built lazily next
    batch = decode_batch(payloads, registry)
    alone = [built(batch, row, payload) for row, payload in enumerate(payloads)]
    packed = [built(batch, row, payload) for row, payload in enumerate(payloads)]
    assert all(map(deferred, alone + packed))
    assert [encode_one(msg) for msg in alone] == payloads
    assert encode_batch(packed) == payloads


def test_a_lazy_message_keeps_what_was_set_before_its_arrays_were_built() -> None:
    mine, _ = lazy(plannable()[2])
    mine.row_timestamps = np.array([1, 2, 3], dtype=np.uint64)  # type: ignore[attr-defined]
    assert (mine.begin_ts, mine.end_ts) == (1, 3)
    assert mine.primary_keys.tolist() == [5, 6, 7]  # type: ignore[attr-defined]
    assert mine.row_timestamps.tolist() == [1, 2, 3]  # type: ignore[attr-defined]
    mine.hash_keys.append(7)
    assert mine.hash_keys == [7]
    mine.position = None
    assert mine.position is None


def test_a_lazy_insert_equals_the_decoded_one() -> None:
    mine, theirs = lazy(numeric_insert(5, 6))
    assert deferred(mine)
    assert (mine.begin_ts, mine.end_ts) == (theirs.begin_ts, theirs.end_ts) == (405, 410)
    assert_same(mine, theirs)
    insert: Any = mine
    assert insert.field("vec").values.shape == (6, 4)
    assert insert.field("f").valid.tolist() == [True] * 6
    assert insert.num_rows == 6


@pytest.mark.parametrize("index", range(len(PLANNABLE)))
def test_lazy_messages_copy_pickle_replace_and_encode_like_decoded_ones(index: int) -> None:
    mine, theirs = lazy(plannable()[index])
    assert encode(mine) == PLANNABLE[index]
    for clone in (copy.copy, copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))):
        assert_same(clone(mine), clone(theirs))
    mine2, _ = lazy(plannable()[index])
    assert_same(dataclasses.replace(mine2), theirs)
    mine3, _ = lazy(plannable()[index])
    assert repr(mine3) == repr(theirs)
    assert codec.to_jsonable(mine3) == codec.to_jsonable(theirs)


def test_large_payloads_are_checked_without_copies_and_still_caught() -> None:
    big = numeric_insert(1, 300)
    big.fields.append(
        FieldData("emb", DataType.FLOAT_VECTOR, np.ones((300, 16), np.float32), dim=16)
    )
    payload = encode(big)
    assert len(payload) > codec._COPY_LIMIT
    registry = MessageRegistry(BUILTIN_TYPES)
    assert_batch_agrees([payload, PLANNABLE[1]], registry)
    assert_batch_agrees([payload, payload, PLANNABLE[1]], registry)  # column-wise
    flipped = bytearray(payload)
    flipped[-7] ^= 1  # inside the vectors
    assert_batch_agrees([payload, bytes(flipped)], registry)
    assert decode_batch([bytes(flipped), payload], registry).bad[0][0] == 0


# --- found by fuzzing (tests/fuzzing.py) -------------------------------------------------------


def test_an_envelope_time_range_that_is_not_the_rows_is_a_decode_error() -> None:
    """The barrier orders by the envelope's range, re-encoding writes the rows': a payload
    whose two disagree (checksum right) is rejected, on every decode path."""
    registry = MessageRegistry(BUILTIN_TYPES)
    good = PLANNABLE[2]  # a Delete of 3 rows, row timestamps [35, 41, 38]
    fields, body, area = split_payload(good)
    lying_envelope = build_payload(
        fields[3], orjson.dumps(body), area, msg_id=4, timestamp=40, begin_ts=35, end_ts=40
    )
    stamps = np.frombuffer(area, "<u8", 3, body["row_timestamps"]["o"]).copy()
    stamps[1] = 99  # the rows' max is now 99, the envelope still says 41
    lying_rows = rebuild(good, body, area.replace(np.array([35, 41, 38], "<u8").tobytes(),
                                                  stamps.tobytes()))  # fmt: skip
    expected = {
        lying_envelope: "DeleteMsg(msg_id=4): the envelope's time range [35, 40] is not its "
        "rows' [35, 41]",
        lying_rows: "DeleteMsg(msg_id=4): the envelope's time range [35, 41] is not its "
        "rows' [35, 99]",
    }
    for bad, message in expected.items():
        with pytest.raises(DecodeError) as info:
            decode(bad, registry)
        assert str(info.value) == message
        for _ in range(2):  # cold, then with the good payload's plan cached
            batch = decode_batch([good, bad, good], registry)
            assert [(i, type(e), str(e)) for i, e in batch.bad] == [(1, DecodeError, message)]
            assert batch.msg_ids == [4, 4]
        batch = decode_batch([bad], registry)  # the plan cached, the payload alone
        assert [(i, str(e)) for i, e in batch.bad] == [(0, message)]
        mixed = [PLANNABLE[0], good, bad, PLANNABLE[3]]  # several plans, some without rows
        batch = decode_batch(mixed, registry)
        assert [(i, str(e)) for i, e in batch.bad] == [(2, message)]
        assert batch.msg_ids == [0, 4, 1]


def test_a_one_row_insert_whose_envelope_lies_about_its_timestamp_is_rejected() -> None:
    registry = MessageRegistry(BUILTIN_TYPES)
    good = encode(numeric_insert(9, 1))
    fields, body, area = split_payload(good)
    assert decode_batch([good, good], registry).bad == []
    bad = build_payload(
        fields[3],
        orjson.dumps(body),
        area,
        msg_id=9,
        timestamp=fields[5],
        begin_ts=fields[7],
        end_ts=fields[8] + 1,
    )
    batch = decode_batch([good, bad], registry)
    assert [(i, type(e)) for i, e in batch.bad] == [(1, DecodeError)]
    assert "the envelope's time range" in str(batch.bad[0][1])


# --- unchecked bodies -----------------------------------------------------------------------

UNCHECKED = frozenset({int(InsertMsg.MSG_TYPE), int(DeleteMsg.MSG_TYPE)})


def text_insert(msg_id: int, texts: list[str]) -> InsertMsg:
    rows = len(texts)
    return InsertMsg(
        msg_id=msg_id,
        timestamp=100 + msg_id,
        source_id=3,
        collection_name="c",
        partition_name="p",
        row_ids=np.arange(rows) + msg_id * 10,
        row_timestamps=np.arange(rows) + 90 + msg_id,
        fields=[FieldData("title", DataType.VARCHAR, texts)],
    )


def test_unchecked_bodies_get_shared_plans_whose_messages_equal_the_decoded_ones() -> None:
    """Varchar Inserts (no cached plan) and a varchar-keyed Delete: one plan per type,
    none cached in the registry, no body read on arrival (collection and partition
    included), and every message built from one behaves as ``decode``'s once its body is
    read."""
    msgs = [
        text_insert(1, ["a", "b"]),
        text_insert(2, ["cc", "d"]),
        text_insert(3, ["e"]),
        DeleteMsg(msg_id=4, timestamp=50, collection_name="c", primary_keys=["x", "y"]),
    ]
    payloads = [encode(m) for m in msgs]
    registry = MessageRegistry(BUILTIN_TYPES)
    batch = decode_batch(payloads, registry, unchecked=UNCHECKED)
    assert batch.bad == [] and batch.ready == []
    plans = batch.plans
    assert [type(p).__name__ for p in plans] == [
        "_UncheckedInsertPlan",
        "_UncheckedInsertPlan",
        "_UncheckedInsertPlan",
        "_UncheckedDeletePlan",
    ]
    assert plans[0] is plans[1] is plans[2] and plans[3] is not plans[0]
    assert registry.plans == {}
    assert batch.ts == [decode(p).end_ts for p in payloads]
    for row, payload in enumerate(payloads):
        mine = built(batch, row, payload)
        unread = {"fields", "primary_keys", "collection_name", "partition_name"}
        assert not unread & mine.__dict__.keys()
        assert mine.collection_name == "c"  # type: ignore[attr-defined]
        assert {"collection_name", "partition_name"} <= mine.__dict__.keys()
        assert_same(mine, decode(payload))


def test_a_batch_with_unchecked_bodies_is_checked_column_wise_as_one_by_one() -> None:
    """Unchecked Inserts and Deletes (no cached plan) beside payloads with cached plans
    and ticks: the column-wise pass gives each exactly the plan, time and envelope facts
    that checking them one by one gives -- and leaves a batch to the one-by-one way when a
    payload does not qualify (an older codec version, a zero timestamp, a bad checksum)."""
    registry = MessageRegistry(BUILTIN_TYPES)
    numeric = encode(numeric_insert())
    decode_batch([numeric], registry)  # caches its plan
    inserts = [encode(text_insert(n, ["a" * n, "b"])) for n in range(1, 4)]
    delete = encode(DeleteMsg(msg_id=9, timestamp=50, collection_name="c", primary_keys=["x"]))
    tick = encode(TimeTickMsg(msg_id=10, timestamp=200))
    sound = [inserts[0], numeric, tick, inserts[1], delete, inserts[2]]
    fields, body, area = split_payload(inserts[1])
    older = rebuild(inserts[1], body, version=2)
    no_time = build_payload(fields[3], orjson.dumps(body), area, msg_id=2, timestamp=0,
                            begin_ts=fields[7], end_ts=fields[8])  # fmt: skip
    flipped = inserts[2][:-1] + bytes([inserts[2][-1] ^ 1])
    for payloads in [sound, [*sound, older], [no_time, *sound], [*sound, flipped]]:
        batch = decode_batch(payloads, registry, unchecked=UNCHECKED)
        one_by_one = codec._decode_each(payloads, registry, codec.DEFAULT_MAX_MESSAGE_BYTES,
                                        UNCHECKED)  # fmt: skip
        assert [(i, str(e)) for i, e in batch.bad] == [(i, str(e)) for i, e in one_by_one.bad]
        assert [type(p) for p in batch.plans] == [type(p) for p in one_by_one.plans]
        assert all(
            mine is theirs
            for mine, theirs in zip(batch.plans, one_by_one.plans, strict=True)
            if not isinstance(mine, ReadyPlan)
        )
        for column in ("ts", "kinds", "msg_ids", "stamps", "sources", "ready"):
            assert getattr(batch, column) == getattr(one_by_one, column), column
    assert [type(p).__name__ for p in decode_batch(sound, registry, unchecked=UNCHECKED).plans] == [
        "_UncheckedInsertPlan",
        "InsertPlan",
        "StaticPlan",
        "_UncheckedInsertPlan",
        "_UncheckedDeletePlan",
        "_UncheckedInsertPlan",
    ]


def test_unchecked_bodies_still_get_the_envelope_checks_on_arrival() -> None:
    """A bad checksum or an oversized payload is refused on arrival with ``decode``'s
    error; a payload of the older codec version is decoded in full, and one whose body
    has a cached plan goes through that plan, as without ``unchecked``."""
    sound = encode(text_insert(1, ["a"]))
    flipped = sound[:-1] + bytes([sound[-1] ^ 1])
    old = rebuild(sound, split_payload(sound)[1], version=2)
    numeric = encode(numeric_insert())
    registry = MessageRegistry(BUILTIN_TYPES)
    decode_batch([numeric], registry)  # caches its plan
    payloads = [flipped, sound, numeric]
    batch = decode_batch(payloads, registry, 1 << 20, UNCHECKED)
    assert [(i, type(e), str(e)) for i, e in batch.bad] == [
        (0, DecodeError, "checksum mismatch (corrupt or truncated payload)")
    ]
    assert [type(p).__name__ for p in batch.plans] == ["_UncheckedInsertPlan", "InsertPlan"]
    limited = decode_batch([sound], registry, len(sound) - 1, UNCHECKED)
    assert [str(e) for _, e in limited.bad] == [
        f"payload of {len(sound)} bytes exceeds the limit of {len(sound) - 1}"
    ]
    old_batch = decode_batch([old], registry, unchecked=UNCHECKED)
    assert [type(p).__name__ for p in old_batch.plans] == ["ReadyPlan"]
    assert_same(built(old_batch, 0, old), decode(old))


def test_an_unchecked_body_that_is_bad_raises_decodes_error_when_read() -> None:
    payload = encode(text_insert(1, ["a", "b"]))
    _, body, _ = split_payload(payload)
    body["fields"][0]["rows"] = 1
    bad = rebuild(payload, body)
    with pytest.raises(DecodeError) as expected:
        decode(bad)
    batch = decode_batch([bad], unchecked=UNCHECKED)
    assert batch.bad == []
    msg = built(batch, 0, bad)
    assert (msg.msg_id, msg.time_range()) == (1, (91, 92))
    for name in ["row_ids", "collection_name", "row_ids"]:  # a failed read builds nothing
        with pytest.raises(DecodeError) as caught:
            getattr(msg, name)
        assert str(caught.value) == str(expected.value)
    # Its repr, in a log line about it say, shows what is known, never raising.
    assert (
        repr(msg)
        == f"InsertMsg(msg_id=1, timestamp=101, source_id=3, channel={WHERE[0]!r}, rows=?)"
    )


def test_unchecked_bodies_are_for_insert_and_delete_only() -> None:
    from msgstream import MsgStream, config_from_dict, new_client

    client = new_client(config_from_dict({"mq": {"type": "memory"}}, env={}))
    with pytest.raises(ValueError, match="unchecked_bodies") as caught:
        MsgStream(client, unchecked_bodies={int(TimeTickMsg.MSG_TYPE), 3})
    assert str(caught.value) == (
        f"unchecked_bodies takes the Insert and Delete type codes "
        f"{sorted(UNCHECKED)}, got [{int(TimeTickMsg.MSG_TYPE)}]"
    )


async def test_report_bad_refuses_a_message_the_stream_did_not_consume() -> None:
    from msgstream import MsgStream, StreamStateError, config_from_dict, new_client

    client = new_client(config_from_dict({"mq": {"type": "memory"}}, env={}))
    async with MsgStream(client, unchecked_bodies={int(InsertMsg.MSG_TYPE)}) as stream:
        with pytest.raises(StreamStateError) as caught:
            stream.report_bad(text_insert(1, ["a"]), DecodeError("bad"))
    assert str(caught.value) == "InsertMsg was not consumed by this stream"


def test_a_batch_below_column_wise_from_is_checked_one_by_one_with_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``column_wise_from`` only picks the way: a smaller batch never reaches the
    column-wise checks, and gets the same rows as a batch that does."""
    registry = MessageRegistry(BUILTIN_TYPES)
    column_wise = decode_batch(PLANNABLE, registry)

    def no_column_wise(*args: Any) -> Any:
        raise AssertionError("a batch below column_wise_from was checked column-wise")

    monkeypatch.setattr(codec, "_decode_known", no_column_wise)
    each = decode_batch(PLANNABLE, registry, column_wise_from=len(PLANNABLE) + 1)
    assert [type(p) for p in each.plans] == [type(p) for p in column_wise.plans]
    assert each.plans == column_wise.plans  # the cached plans, looked up one by one
    for name in ("ts", "kinds", "msg_ids", "stamps", "sources", "bad", "ready"):
        assert getattr(each, name) == getattr(column_wise, name), name
