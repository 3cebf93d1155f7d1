"""Stable hashing and repack rules (DESIGN.md section 4)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from msgstream.errors import MsgStreamError
from msgstream.streams import routing
from msgstream.streams.routing import (
    INT64_MAX,
    INT64_MIN,
    RepackFunc,
    RoutingError,
    default_repack,
    hash_int64,
    hash_int64_array,
    hash_primary_keys,
    hash_str,
    murmur3_32,
    repack_by_first_key,
    whole_bucket,
)
from msgstream.wire.messages import (
    CreatePartitionMsg,
    DeleteMsg,
    DmlMsg,
    DropCollectionMsg,
    InsertMsg,
    TimeTickMsg,
    TsMsg,
)
from msgstream.wire.schema import DataType, FieldData

SRC = Path(__file__).resolve().parents[1] / "src"

# --------------------------------------------------------------------------- hashing


@pytest.mark.parametrize(
    ("data", "seed", "expected"),
    [
        (b"", 0, 0),
        (b"", 1, 0x514E28B7),
        (b"", 0xFFFFFFFF, 0x81F16F39),
        (b"hello", 0, 0x248BFA47),
        (b"The quick brown fox jumps over the lazy dog", 0, 0x2E4FF723),
        (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
        (b"\xff\xff\xff\xff", 0, 0x76293B50),
        (b"!Ce\x87", 0, 0xF55B516B),
        (b"!Ce", 0, 0x7E4A8634),
        (b"!C", 0, 0xA0F7B07A),
        (b"!", 0, 0x72661CF4),
    ],
)
def test_murmur3_known_answers(data: bytes, seed: int, expected: int) -> None:
    assert murmur3_32(data, seed) == expected


def test_murmur3_smhasher_verification_value() -> None:
    # SMHasher's VerificationTest for MurmurHash3_x86_32: hash bytes(range(i)) with seed
    # 256 - i for i in 0..255, concatenate the little-endian results, hash with seed 0.
    digests = b"".join(
        murmur3_32(bytes(range(i)), 256 - i).to_bytes(4, "little") for i in range(256)
    )
    assert murmur3_32(digests, 0) == 0xB0F57EE3


def test_murmur3_rejects_bad_seed() -> None:
    with pytest.raises(ValueError, match="seed"):
        murmur3_32(b"x", -1)
    with pytest.raises(ValueError, match="seed"):
        murmur3_32(b"x", 1 << 32)


def test_hash_str_known_answers() -> None:
    assert hash_str("") == 0
    assert hash_str("hello") == 0x248BFA47
    assert hash_str("The quick brown fox jumps over the lazy dog") == 0x2E4FF723


@pytest.mark.parametrize("key", [0, 1, -1, 42, -42, INT64_MAX, INT64_MIN, 1 << 32, -(1 << 40)])
def test_hash_int64_is_murmur_of_le_bytes(key: int) -> None:
    assert hash_int64(key) == murmur3_32(struct.pack("<q", key))
    assert 0 <= hash_int64(key) <= 0xFFFFFFFF


def test_hash_int64_known_answers() -> None:
    # Pinned values: they must never change, or data already routed moves channels.
    assert hash_int64(0) == 1669671676
    assert hash_int64(1) == 1392991556
    assert hash_int64(-1) == 1651860712
    assert hash_int64(INT64_MAX) == 2188461247
    assert hash_int64(INT64_MIN) == 1366273829
    assert hash_int64(123456789) == 690028081


@pytest.mark.parametrize("key", [INT64_MAX + 1, INT64_MIN - 1, 1 << 64, -(1 << 70)])
def test_hash_int64_out_of_range(key: int) -> None:
    with pytest.raises(ValueError, match=str(key)):
        hash_int64(key)
    with pytest.raises(ValueError, match=str(key)):
        hash_primary_keys([1, key, 2])


def test_hash_int64_rejects_non_ints() -> None:
    with pytest.raises(TypeError):
        hash_int64(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hash_int64(True)


def test_hash_int64_accepts_numpy_scalars() -> None:
    assert hash_int64(np.int64(-7)) == hash_int64(-7)  # type: ignore[arg-type]
    assert hash_int64(np.uint32(7)) == hash_int64(7)  # type: ignore[arg-type]


@given(st.lists(st.integers(min_value=INT64_MIN, max_value=INT64_MAX), max_size=200))
def test_vector_equals_scalar(keys: list[int]) -> None:
    array = np.array(keys, dtype=np.int64)
    hashed = hash_int64_array(array)
    assert hashed.dtype == np.uint32
    assert hashed.shape == (len(keys),)
    assert hashed.tolist() == [hash_int64(k) for k in keys]
    assert hash_primary_keys(keys) == [hash_int64(k) for k in keys]
    assert hash_primary_keys(array) == [hash_int64(k) for k in keys]


@given(hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=20)))
def test_vector_keeps_shape(array: np.ndarray) -> None:
    hashed = hash_int64_array(array)
    assert hashed.shape == array.shape
    assert hashed.reshape(-1).tolist() == [hash_int64(int(k)) for k in array.reshape(-1)]


def test_vector_extremes_and_other_int_dtypes() -> None:
    extremes = [INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX]
    assert hash_int64_array(np.array(extremes, dtype=np.int64)).tolist() == [
        hash_int64(k) for k in extremes
    ]
    small = [-128, -1, 0, 1, 127]
    expected = [hash_int64(k) for k in small]
    for dtype in (np.int8, np.int16, np.int32):
        assert hash_int64_array(np.array(small, dtype=dtype)).tolist() == expected
    assert hash_int64_array(np.array([0, 1, INT64_MAX], dtype=np.uint64)).tolist() == [
        hash_int64(0),
        hash_int64(1),
        hash_int64(INT64_MAX),
    ]
    assert hash_int64_array(np.array([], dtype=np.int64)).shape == (0,)
    assert hash_int64_array(np.array([], dtype=np.int64)).dtype == np.uint32


def test_vector_rejects_out_of_range_and_non_ints() -> None:
    with pytest.raises(ValueError, match=str(INT64_MAX + 1)):
        hash_int64_array(np.array([1, INT64_MAX + 1], dtype=np.uint64))
    with pytest.raises(TypeError):
        hash_int64_array(np.array([1.0, 2.0]))


def test_str_hashing_of_unicode() -> None:
    keys = ["", "a", "é", "日本語", "emoji 🎉", "naïve café", "Ω" * 100]
    expected = [murmur3_32(k.encode("utf-8")) for k in keys]
    assert [hash_str(k) for k in keys] == expected
    assert hash_primary_keys(keys) == expected
    assert hash_primary_keys(np.array(keys)) == expected
    assert hash_primary_keys(np.array(keys, dtype=object)) == expected
    # "é" composed vs decomposed are different byte strings, hence different hashes.
    assert hash_str("\u00e9") != hash_str("e\u0301")
    assert hash_str("é") == murmur3_32(b"\xc3\xa9")


def test_str_with_lone_surrogate_is_an_error() -> None:
    with pytest.raises(ValueError, match="UTF-8"):
        hash_str("bad \ud800")


def test_hash_primary_keys_dispatch_errors() -> None:
    assert hash_primary_keys([]) == []
    assert hash_primary_keys(np.array([], dtype=np.int64)) == []
    with pytest.raises(TypeError, match="mix"):
        hash_primary_keys(["a", 1])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hash_primary_keys("abc")
    with pytest.raises(TypeError):
        hash_primary_keys([1.5])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hash_primary_keys(np.array([1.5, 2.5]))
    with pytest.raises(ValueError, match="1-d"):
        hash_primary_keys(np.zeros((2, 2), dtype=np.int64))


_SUBPROCESS_CODE = """
import json, sys
from msgstream.streams.routing import hash_int64_array, hash_primary_keys
import numpy as np
data = json.loads(sys.stdin.read())
out = {
    "ints": hash_primary_keys(data["ints"]),
    "vector": hash_int64_array(np.array(data["ints"], dtype=np.int64)).tolist(),
    "strs": hash_primary_keys(data["strs"]),
    "salted": hash(data["strs"][1]),
}
print(json.dumps(out))
"""


@pytest.mark.parametrize("hashseed", ["1", "12345"])
def test_hashes_are_identical_across_processes(hashseed: str) -> None:
    ints = [0, 1, -1, INT64_MAX, INT64_MIN, 987654321, -123456789012]
    strs = ["", "alpha", "日本語", "🎉", "x" * 1000]
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = hashseed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS_CODE],
        input=json.dumps({"ints": ints, "strs": strs}),
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    theirs = json.loads(done.stdout)
    assert theirs["ints"] == [hash_int64(k) for k in ints]
    assert theirs["vector"] == theirs["ints"]
    assert theirs["strs"] == [hash_str(s) for s in strs]
    assert theirs["ints"][:3] == [1669671676, 1392991556, 1651860712]
    assert theirs["strs"][0] == 0


# --------------------------------------------------------------------------- repack


def make_insert(keys: Sequence[int], msg_id: int = 7, with_keys: bool = True) -> InsertMsg:
    n = len(keys)
    return InsertMsg(
        msg_id=msg_id,
        timestamp=1000,
        source_id=3,
        hash_keys=list(keys) if with_keys else [],
        collection_name="c",
        partition_name="p",
        row_ids=np.arange(100, 100 + n, dtype=np.int64),
        row_timestamps=np.arange(500, 500 + n, dtype=np.uint64),
        fields=[
            FieldData("pk", DataType.INT64, np.arange(10, 10 + n, dtype=np.int64)),
            FieldData(
                "vec",
                DataType.FLOAT_VECTOR,
                np.arange(n * 2, dtype=np.float32).reshape(n, 2),
                dim=2,
            ),
            FieldData("name", DataType.VARCHAR, [f"row{i}" for i in range(n)]),
        ],
    )


def test_insert_rows_split_by_bucket_in_order() -> None:
    msg = make_insert([0, 4, 2, 3, 7, 5, 6])  # buckets mod 3: 0 1 2 0 1 2 0
    out = default_repack([msg], 3)
    assert list(out) == [0, 1, 2]
    assert all(len(v) == 1 for v in out.values())
    parts = {b: msgs[0] for b, msgs in out.items()}
    for part in parts.values():
        assert isinstance(part, InsertMsg)
        assert (part.msg_id, part.timestamp, part.source_id) == (7, 1000, 3)
        assert (part.collection_name, part.partition_name) == ("c", "p")
    p0, p1, p2 = (parts[b] for b in (0, 1, 2))
    assert isinstance(p0, InsertMsg)
    assert isinstance(p1, InsertMsg)
    assert isinstance(p2, InsertMsg)
    assert p0.row_ids.tolist() == [100, 103, 106]
    assert p1.row_ids.tolist() == [101, 104]
    assert p2.row_ids.tolist() == [102, 105]
    assert p0.hash_keys == [0, 3, 6]
    assert p1.hash_keys == [4, 7]
    assert p2.hash_keys == [2, 5]
    assert p0.timestamps.tolist() == [500, 503, 506]
    assert p1.timestamps.tolist() == [501, 504]
    assert p2.timestamps.tolist() == [502, 505]
    # every column sliced with the same rows
    assert p0.field("pk").values.tolist() == [10, 13, 16]  # type: ignore[union-attr]
    assert p1.field("pk").values.tolist() == [11, 14]  # type: ignore[union-attr]
    assert p2.field("pk").values.tolist() == [12, 15]  # type: ignore[union-attr]
    assert p0.field("vec").values.tolist() == [[0.0, 1.0], [6.0, 7.0], [12.0, 13.0]]  # type: ignore[union-attr]
    assert p1.field("vec").values.tolist() == [[2.0, 3.0], [8.0, 9.0]]  # type: ignore[union-attr]
    assert p2.field("vec").values.tolist() == [[4.0, 5.0], [10.0, 11.0]]  # type: ignore[union-attr]
    assert p0.field("name").values == ["row0", "row3", "row6"]
    assert p1.field("name").values == ["row1", "row4"]
    assert p2.field("name").values == ["row2", "row5"]
    # the original is untouched
    assert msg.num_rows == 7
    assert msg.hash_keys == [0, 4, 2, 3, 7, 5, 6]


def test_insert_with_real_primary_key_hashes() -> None:
    pks = list(range(10, 30))
    msg = make_insert(hash_primary_keys(pks))
    out = default_repack([msg], 4)
    expected: dict[int, list[int]] = {}
    for i, pk in enumerate(pks):
        expected.setdefault(hash_int64(pk) % 4, []).append(100 + i)
    got = {b: m[0].row_ids.tolist() for b, m in out.items()}  # type: ignore[attr-defined]
    assert got == dict(sorted(expected.items()))
    assert sum(len(v) for v in got.values()) == 20


def test_insert_in_one_bucket_passes_through_unchanged() -> None:
    msg = make_insert([1, 4, 7])
    out = default_repack([msg], 3)
    assert out == {1: [msg]}
    assert out[1][0] is msg


def test_deletes_split_by_int_and_str_keys() -> None:
    int_del = DeleteMsg(
        msg_id=11,
        timestamp=2000,
        collection_name="c",
        primary_keys=np.array([-5, 6, 7, 8], dtype=np.int64),
        row_timestamps=np.array([1, 2, 3, 4], dtype=np.uint64),
        hash_keys=[1, 2, 3, 5],  # mod 2: 1 0 1 1
    )
    str_del = DeleteMsg(
        msg_id=12,
        timestamp=2001,
        collection_name="c",
        primary_keys=["a", "bb", "ccc"],
        hash_keys=[10, 11, 12],  # mod 2: 0 1 0
    )
    out = default_repack([int_del, str_del], 2)
    assert list(out) == [0, 1]
    b0, b1 = out[0], out[1]
    assert [m.msg_id for m in b0] == [11, 12]
    assert [m.msg_id for m in b1] == [11, 12]
    assert all(isinstance(m, DeleteMsg) for m in b0 + b1)
    d0i, d0s = b0
    d1i, d1s = b1
    assert isinstance(d0i, DeleteMsg)
    assert isinstance(d0s, DeleteMsg)
    assert isinstance(d1i, DeleteMsg)
    assert isinstance(d1s, DeleteMsg)
    assert d0i.primary_keys.tolist() == [6]  # type: ignore[union-attr]
    assert d0i.timestamps.tolist() == [2]
    assert d1i.primary_keys.tolist() == [-5, 7, 8]  # type: ignore[union-attr]
    assert d1i.timestamps.tolist() == [1, 3, 4]
    assert d1i.hash_keys == [1, 3, 5]
    assert d0s.primary_keys == ["a", "ccc"]
    assert d0s.hash_keys == [10, 12]
    assert d0s.timestamps.tolist() == [2001, 2001]
    assert d1s.primary_keys == ["bb"]


def test_delete_with_hashed_str_keys() -> None:
    keys = ["alpha", "beta", "gamma", "delta", "日本"]
    msg = DeleteMsg(
        timestamp=1,
        msg_id=1,
        collection_name="c",
        primary_keys=keys,
        hash_keys=hash_primary_keys(keys),
    )
    out = default_repack([msg], 3)
    expected: dict[int, list[str]] = {}
    for k in keys:
        expected.setdefault(hash_str(k) % 3, []).append(k)
    assert {b: m[0].primary_keys for b, m in out.items()} == dict(sorted(expected.items()))  # type: ignore[attr-defined]


@pytest.mark.parametrize("repack", [default_repack, repack_by_first_key])
def test_other_types_go_to_first_key_bucket(repack: RepackFunc) -> None:
    drop = DropCollectionMsg(msg_id=21, collection_name="c", hash_keys=[5, 0, 1])
    part = CreatePartitionMsg(
        msg_id=22, collection_name="c", partition_name="p", hash_keys=[hash_str("c")]
    )
    tick = TimeTickMsg(msg_id=23, timestamp=9, hash_keys=[4])
    out = repack([drop, part, tick], 4)
    part_bucket = hash_str("c") % 4
    expected: dict[int, list[TsMsg]] = {}
    for bucket, m in [(1, drop), (part_bucket, part), (0, tick)]:
        expected.setdefault(bucket, []).append(m)
    assert out == dict(sorted(expected.items()))
    assert out[1][0] is drop


def test_pack_order_is_kept_within_a_bucket() -> None:
    a = DropCollectionMsg(msg_id=1, collection_name="a", hash_keys=[2])
    ins = make_insert([0, 1, 2, 3], msg_id=2)  # mod 2: 0 1 0 1
    b = DropCollectionMsg(msg_id=3, collection_name="b", hash_keys=[1])
    c = DropCollectionMsg(msg_id=4, collection_name="c", hash_keys=[0])
    out = default_repack([a, ins, b, c], 2)
    assert [m.msg_id for m in out[0]] == [1, 2, 4]
    assert [m.msg_id for m in out[1]] == [2, 3]
    assert out[0][1].row_ids.tolist() == [100, 102]  # type: ignore[attr-defined]
    assert out[1][0].row_ids.tolist() == [101, 103]  # type: ignore[attr-defined]


def test_mismatched_lengths_raise_naming_the_message() -> None:
    bad = make_insert([0, 1, 2], msg_id=77)
    bad.hash_keys = [0, 1]
    with pytest.raises(ValueError, match=r"InsertMsg\(msg_id=77\) has 2 hash keys for 3 rows"):
        default_repack([make_insert([0, 1, 2]), bad], 2)
    missing = make_insert([0, 1], msg_id=78, with_keys=False)
    with pytest.raises(ValueError, match=r"InsertMsg\(msg_id=78\) has 0 hash keys for 2 rows"):
        default_repack([missing], 2)
    dele = DeleteMsg(
        timestamp=1,
        msg_id=79,
        collection_name="c",
        primary_keys=np.array([1, 2]),
        hash_keys=[1, 2, 3],
    )
    with pytest.raises(ValueError, match=r"DeleteMsg\(msg_id=79\) has 3 hash keys for 2 rows"):
        default_repack([dele], 2)


def test_routing_errors_are_msgstream_errors() -> None:
    with pytest.raises(RoutingError) as info:
        default_repack([DropCollectionMsg(msg_id=1, collection_name="c")], 2)
    assert isinstance(info.value, MsgStreamError)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("repack", [default_repack, repack_by_first_key])
def test_missing_keys_error(repack: RepackFunc) -> None:
    msg = CreatePartitionMsg(msg_id=31, collection_name="c", partition_name="p")
    with pytest.raises(ValueError, match=r"CreatePartitionMsg\(msg_id=31\) has no hash keys") as e:
        repack([msg], 2)
    assert "hash_keys" in str(e.value)
    assert "broadcast" in str(e.value)


def test_empty_dml_needs_exactly_one_key() -> None:
    empty = InsertMsg(timestamp=1, msg_id=41, collection_name="c")
    with pytest.raises(ValueError, match=r"InsertMsg\(msg_id=41\) has 0 rows and 0 hash keys"):
        default_repack([empty], 2)
    empty.hash_keys = [1, 2]
    with pytest.raises(ValueError, match=r"InsertMsg\(msg_id=41\) has 0 rows and 2 hash keys"):
        default_repack([empty], 2)
    empty.hash_keys = [3]
    assert default_repack([empty], 2) == {1: [empty]}
    empty_del = DeleteMsg(timestamp=1, msg_id=42, collection_name="c", hash_keys=[4])
    assert default_repack([empty_del], 3) == {1: [empty_del]}
    with pytest.raises(ValueError, match=r"DeleteMsg\(msg_id=43\) has 0 rows and 0 hash keys"):
        default_repack([DeleteMsg(timestamp=1, msg_id=43, collection_name="c")], 3)


def test_repack_by_first_key_keeps_dml_whole() -> None:
    ins = make_insert([5, 0, 1, 2])
    dele = DeleteMsg(
        timestamp=1, msg_id=8, collection_name="c", primary_keys=np.array([1, 2]), hash_keys=[2, 3]
    )
    out = repack_by_first_key([ins, dele], 3)
    assert out == {2: [ins, dele]}
    assert out[2][0] is ins
    assert out[2][1] is dele


def test_custom_repack_function() -> None:
    def by_collection(msgs: Sequence[TsMsg], num_buckets: int) -> dict[int, list[TsMsg]]:
        out: dict[int, list[TsMsg]] = {}
        for m in msgs:
            name = getattr(m, "collection_name", "")
            out.setdefault(hash_str(name) % num_buckets, []).append(m)
        return out

    custom: RepackFunc = by_collection
    msgs: list[TsMsg] = [
        make_insert([0, 1], msg_id=1),
        DropCollectionMsg(msg_id=2, collection_name="c"),
    ]
    out = custom(msgs, 5)
    assert out == {hash_str("c") % 5: msgs}


def test_one_bucket_takes_everything() -> None:
    ins = make_insert([0, 1, 2, 3, 99])
    dele = DeleteMsg(
        timestamp=1, msg_id=8, collection_name="c", primary_keys=["x"], hash_keys=[12345]
    )
    drop = DropCollectionMsg(msg_id=9, collection_name="c", hash_keys=[0xFFFFFFFF])
    out = default_repack([ins, dele, drop], 1)
    assert out == {0: [ins, dele, drop]}
    assert out[0][0] is ins


def test_bad_num_buckets() -> None:
    ins = make_insert([0])
    for n in (0, -1):
        with pytest.raises(ValueError, match=f"num_buckets must be >= 1, got {n}"):
            default_repack([ins], n)
        with pytest.raises(ValueError, match="num_buckets"):
            repack_by_first_key([ins], n)
    with pytest.raises(TypeError):
        default_repack([ins], 1.5)  # type: ignore[arg-type]


def test_empty_pack() -> None:
    assert default_repack([], 3) == {}
    assert repack_by_first_key([], 3) == {}


def test_large_and_numpy_hash_keys() -> None:
    ins = make_insert([0, 1, 2])
    ins.hash_keys = [0xFFFFFFFF, 1 << 40, 2]  # mod 3: 0 1 2
    out = default_repack([ins], 3)
    assert {b: m[0].row_ids.tolist() for b, m in out.items()} == {  # type: ignore[attr-defined]
        0: [100],
        1: [101],
        2: [102],
    }
    drop = DropCollectionMsg(msg_id=2, collection_name="c", hash_keys=[np.uint32(7)])  # type: ignore[list-item]
    assert default_repack([drop], 4) == {3: [drop]}
    bad = DropCollectionMsg(msg_id=3, collection_name="c", hash_keys=[1.5])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"DropCollectionMsg\(msg_id=3\)"):
        default_repack([bad], 4)


@given(
    st.lists(st.integers(min_value=0, max_value=0xFFFFFFFF), min_size=1, max_size=60),
    st.integers(min_value=1, max_value=9),
)
def test_split_is_a_partition_of_the_rows(keys: list[int], n: int) -> None:
    msg = make_insert(keys)
    out = default_repack([msg], n)
    seen: list[int] = []
    for bucket, parts in out.items():
        assert 0 <= bucket < n
        assert len(parts) == 1
        part = parts[0]
        assert isinstance(part, InsertMsg)
        rows = part.row_ids.tolist()
        assert rows == sorted(rows)
        assert all(keys[r - 100] % n == bucket for r in rows)
        assert part.field("name").values == [f"row{r - 100}" for r in rows]
        seen.extend(rows)
    assert sorted(seen) == list(range(100, 100 + len(keys)))
    assert list(out) == sorted(out)


_MESSAGE = st.tuples(
    st.sampled_from(["delete", "insert", "drop"]),
    st.integers(min_value=0, max_value=3),
    st.lists(
        st.one_of(
            st.integers(min_value=-(2**40), max_value=2**40),
            st.just(True),
            st.builds(np.int64, st.integers(min_value=0, max_value=99)),
        ),
        max_size=3,
    ),
)


def _general_rules(msgs: list[TsMsg], n: int) -> dict[int, list[TsMsg]]:
    """``default_repack`` as its docstring states it, message by message, without the
    quick route it takes for a message with one int key."""
    pairs: list[tuple[int, TsMsg]] = []
    for msg in msgs:
        if isinstance(msg, InsertMsg | DeleteMsg):
            pairs.extend(routing._split_dml(msg, n))
        else:
            pairs.append((routing._first_key_bucket(msg, n), msg))
    found: dict[int, list[TsMsg]] = {}
    for bucket, msg in pairs:
        found.setdefault(bucket, []).append(msg)
    return dict(sorted(found.items()))


@given(st.lists(_MESSAGE, min_size=1, max_size=4), st.integers(min_value=1, max_value=5))
def test_the_quick_route_of_one_key_messages_follows_the_general_rules(
    specs: list[tuple[str, int, list[int]]], n: int
) -> None:
    """``default_repack`` routes a message with one int key (and at most one row) without
    the general path's calls: same buckets, same messages, same errors, alone or in a pack."""
    pack: list[TsMsg] = []
    for msg_id, (kind, rows, keys) in enumerate(specs):
        msg: TsMsg
        if kind == "delete":
            msg = DeleteMsg(
                timestamp=1, msg_id=msg_id, collection_name="c", primary_keys=list(range(rows))
            )
        elif kind == "insert":
            msg = make_insert(list(range(rows)), msg_id=msg_id)
        else:
            msg = DropCollectionMsg(msg_id=msg_id, collection_name="c")
        msg.hash_keys = list(keys)
        pack.append(msg)

    def outcome(repack: RepackFunc) -> object:
        try:
            routed = repack(pack, n)
        except (ValueError, TypeError) as exc:
            return type(exc), str(exc)
        return {
            bucket: [(m.msg_id, m.num_rows if isinstance(m, DmlMsg) else 0) for m in msgs]
            for bucket, msgs in routed.items()
        }

    assert outcome(default_repack) == outcome(_general_rules)
    for msg in pack:  # what MsgStream routes a one-message pack by, without a pack
        bucket = whole_bucket(msg, n)
        if bucket is not None:
            routed = _general_rules([msg], n)
            assert list(routed) == [bucket]
            assert routed[bucket] == [msg] and routed[bucket][0] is msg


# Values computed by the hand-written MurmurHash3 that mmh3 replaced: routing must not move.
_PINNED_INT64 = {
    0: 1669671676,
    1: 1392991556,
    -1: 1651860712,
    42: 1871679806,
    2147483648: 386683422,
    -9223372036854775808: 1366273829,
    9223372036854775807: 2188461247,
    123456789012345: 3825968124,
}
_PINNED_STR = {
    "": 0,
    "a": 1009084850,
    "hello": 613153351,
    "订单-42": 452379022,
    "x" * 33: 4243188946,
}


def test_hashes_are_the_values_routing_has_always_used() -> None:
    assert {k: hash_int64(k) for k in _PINNED_INT64} == _PINNED_INT64
    assert {k: hash_str(k) for k in _PINNED_STR} == _PINNED_STR
    assert hash_int64_array(np.array(list(_PINNED_INT64), dtype=np.int64)).tolist() == list(
        _PINNED_INT64.values()
    )
    assert murmur3_32(bytearray(b"hello")) == murmur3_32(memoryview(b"hello")) == 0x248BFA47


def _one_channel_pack(shapes: list[str]) -> list[TsMsg]:
    """Messages by shape: ``i`` a one-row Insert, ``d`` a one-row Delete, ``t`` a tick,
    ``w`` a two-row Insert with one key, ``b`` a Delete keyed by a bool, ``n`` a Delete
    keyed by a numpy int, ``k`` a Delete with two keys for one row."""
    made: list[TsMsg] = []
    for i, shape in enumerate(shapes):
        if shape == "i":
            made.append(
                InsertMsg(
                    msg_id=i, timestamp=i + 1, collection_name="c", row_ids=[i], hash_keys=[i]
                )
            )
        elif shape == "w":
            made.append(
                InsertMsg(
                    msg_id=i, timestamp=i + 1, collection_name="c", row_ids=[i, i], hash_keys=[i]
                )
            )
        elif shape == "t":
            made.append(TimeTickMsg(msg_id=i, timestamp=i + 1, hash_keys=[i]))
        else:
            key: object = {"d": i, "b": True, "n": np.int64(i), "k": i}[shape]
            keys = [key, key] if shape == "k" else [key]
            made.append(
                DeleteMsg(msg_id=i, timestamp=i + 1, collection_name="c", primary_keys=[i],
                          hash_keys=keys)  # type: ignore[arg-type]
            )  # fmt: skip
    return made


@pytest.mark.parametrize(
    "shapes",
    ["i" * 9, "d" * 8, "t" * 8, "idididid", "iiiiiiit", "tiiiiiii", "iiiwiiii", "dddbdddd",
     "dddndddd", "dddkdddd", "i" * 7],
)  # fmt: skip
def test_one_channel_packs_route_as_the_message_loop_does(
    shapes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack to one channel is checked in passes over the whole pack; what it returns or
    raises is what routing it message by message does."""
    pack = _one_channel_pack(list(shapes))

    def outcome() -> object:
        try:
            routed = default_repack(pack, 1)
        except (RoutingError, TypeError) as exc:
            return type(exc), str(exc)
        return {bucket: [m.msg_id for m in msgs] for bucket, msgs in routed.items()}

    by_passes = outcome()
    monkeypatch.setattr(routing, "BULK_ROUTING_FROM", 10**9)
    assert by_passes == outcome()
    refused = {"w": RoutingError, "b": TypeError, "k": RoutingError}
    errors = {refused[shape] for shape in shapes if shape in refused}
    if errors:
        assert isinstance(by_passes, tuple) and {by_passes[0]} == errors
    else:
        assert by_passes == {0: list(range(len(shapes)))}


async def test_a_one_message_produce_goes_where_its_repack_function_says() -> None:
    """MsgStream routes a one-message pack without building buckets when it routes by
    ``default_repack`` (its key's channel), and by the stream's own function otherwise."""
    from msgstream import MsgPack, MsgStream, config_from_dict, new_client

    def last_channel(msgs: Sequence[TsMsg], num_buckets: int) -> dict[int, list[TsMsg]]:
        return {num_buckets - 1: list(msgs)}

    channels = ["c0", "c1", "c2", "c3"]
    for repack, expected in ((None, ["c1", "c2", "c3", "c0"]), (last_channel, ["c3"] * 4)):
        client = new_client(config_from_dict({"mq": {"type": "memory"}}, env={}))
        async with MsgStream(client, repack=repack) as producer:
            await producer.as_producer(channels)
            went = []
            for key in (5, 6, 7, 8):
                msg = make_insert([key], msg_id=key)
                msg.hash_keys = [key]
                (channel,) = await producer.produce(MsgPack.of(msg))
                went.append(channel)
            assert went == expected
            msg = make_insert([1], msg_id=9)
            msg.hash_keys = []
            if repack is None:  # the message the quick route does not take: the full rules'
                with pytest.raises(RoutingError, match="msg_id=9"):
                    await producer.produce(MsgPack.of(msg))
