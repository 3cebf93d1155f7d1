"""Hash routing: stable primary-key hashes and the repack functions of ``produce``.

A producer stream owns an ordered list of channels (``as_producer`` order). Each message
(or each row of an Insert/Delete) carries a 32-bit *hash key* in ``TsMsg.hash_keys`` and is
sent to channel number ``hash_key % len(producer_channels)``, its *bucket*.

Hashing
    :func:`hash_int64` and :func:`hash_str` are MurmurHash3 x86_32 with seed 0 of,
    respectively, the 8-byte little-endian two's-complement encoding of an int64 and the
    UTF-8 bytes of a string. They return unsigned 32-bit ints and are identical on every
    platform, process and run (unlike Python's salted :func:`hash`). The int64 hash is the
    same as Milvus's ``typeutil.Hash32Int64``. :func:`hash_int64_array` is the numpy
    version, :func:`hash_primary_keys` dispatches on the key type.

Repacking
    A :data:`RepackFunc` takes the messages of one pack and the number of producer
    channels and returns ``{bucket: [messages in pack order]}``. :func:`default_repack`
    splits Insert and Delete messages row by row; :func:`repack_by_first_key` keeps every
    message whole. Both raise :class:`RoutingError` (a ``ValueError``) naming the message
    when its keys cannot route it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import Any, TypeAlias

import mmh3
import numpy as np
import numpy.typing as npt

from ..errors import MsgStreamError
from ..wire.messages import DeleteMsg, InsertMsg, TsMsg

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "RepackFunc",
    "RoutingError",
    "default_repack",
    "hash_int64",
    "hash_int64_array",
    "hash_primary_keys",
    "hash_str",
    "murmur3_32",
    "repack_by_first_key",
]

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

U32Array = npt.NDArray[np.uint32]


class RoutingError(MsgStreamError, ValueError):
    """A key cannot be hashed or a message cannot be routed to a bucket."""


# --------------------------------------------------------------------------- hashing

_mmh3_hash = mmh3.hash
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_N = 0xE6546B64
_F1 = 0x85EBCA6B
_F2 = 0xC2B2AE35


def murmur3_32(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of ``data`` (any length) as an unsigned 32-bit int, computed by
    the maintained ``mmh3`` C extension (bit-identical to the reference implementation;
    the tests pin its values). ``murmur3_32(b"hello") == 0x248BFA47``.
    """
    if not 0 <= seed <= _MASK32:
        raise ValueError(f"murmur3 seed {seed} is outside the uint32 range")
    return _mmh3_hash(data if type(data) is bytes else bytes(data), seed, signed=False)


def _check_int64(key: Any) -> int:
    if isinstance(key, bool | np.bool_):
        raise TypeError(f"primary key {key!r} is a bool, not an int64")
    try:
        value = operator.index(key)
    except TypeError:
        raise TypeError(f"primary key {key!r} is a {type(key).__name__}, not an int64") from None
    if not INT64_MIN <= value <= INT64_MAX:
        raise RoutingError(f"primary key {value} is outside the int64 range")
    return value


def hash_int64(key: int) -> int:
    """MurmurHash3 x86_32 (seed 0) of the 8-byte little-endian two's-complement ``key``.

    Raises ``ValueError`` (:class:`RoutingError`) if ``key`` is outside the int64 range.
    """
    value = _check_int64(key)
    return murmur3_32((value & _MASK64).to_bytes(8, "little"))


def hash_str(key: str) -> int:
    """MurmurHash3 x86_32 (seed 0) of the UTF-8 encoding of ``key``."""
    if not isinstance(key, str):
        raise TypeError(f"primary key {key!r} is a {type(key).__name__}, not a str")
    try:
        data = key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RoutingError(f"primary key {key!r} is not valid UTF-8: {exc.reason}") from None
    return murmur3_32(data)


_U_C1 = np.uint32(_C1)
_U_C2 = np.uint32(_C2)
_U_N = np.uint32(_N)
_U_F1 = np.uint32(_F1)
_U_F2 = np.uint32(_F2)
_U_5 = np.uint32(5)
_U_8 = np.uint32(8)


def _rotl32_array(x: U32Array, r: int) -> U32Array:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _block_array(h1: U32Array, k1: U32Array) -> U32Array:
    k1 = k1 * _U_C1
    k1 = _rotl32_array(k1, 15)
    k1 = k1 * _U_C2
    h1 = h1 ^ k1
    h1 = _rotl32_array(h1, 13)
    return h1 * _U_5 + _U_N


def _as_int64_array(keys: Any) -> npt.NDArray[np.int64]:
    array = np.asarray(keys)
    if array.size == 0:
        return np.zeros(array.shape, dtype=np.int64)
    kind = array.dtype.kind
    if kind == "i":
        return array.astype(np.int64, copy=False)
    if kind == "u":
        if array.dtype.itemsize == 8:
            too_big = array > np.uint64(INT64_MAX)
            if too_big.any():
                bad = int(array[too_big].flat[0])
                raise RoutingError(f"primary key {bad} is outside the int64 range")
        return array.astype(np.int64)
    if kind == "O":
        checked = [_check_int64(k) for k in array.flat]
        return np.array(checked, dtype=np.int64).reshape(array.shape)
    raise TypeError(f"primary keys of dtype {array.dtype} are not int64 keys")


def hash_int64_array(keys: npt.ArrayLike) -> U32Array:
    """Vectorised :func:`hash_int64`: a ``uint32`` array of the same shape as ``keys``.

    ``keys`` may hold any integer dtype (unsigned values above the int64 range raise
    ``ValueError``) or Python ints in an object array.
    """
    values = _as_int64_array(keys)
    bits = values.reshape(-1).view(np.uint64)
    lo = (bits & np.uint64(_MASK32)).astype(np.uint32)
    hi = (bits >> np.uint64(32)).astype(np.uint32)
    h1 = np.zeros(lo.shape, dtype=np.uint32)
    h1 = _block_array(h1, lo)
    h1 = _block_array(h1, hi)
    h1 = h1 ^ _U_8
    h1 = h1 ^ (h1 >> np.uint32(16))
    h1 = h1 * _U_F1
    h1 = h1 ^ (h1 >> np.uint32(13))
    h1 = h1 * _U_F2
    h1 = h1 ^ (h1 >> np.uint32(16))
    return h1.reshape(values.shape)


def _to_int_list(hashes: U32Array) -> list[int]:
    out: list[int] = hashes.tolist()
    return out


def hash_primary_keys(keys: npt.NDArray[Any] | Sequence[int] | Sequence[str]) -> list[int]:
    """Stable 32-bit hash keys for a column of primary keys (int64 or str), one per key.

    Integer keys (numpy integer arrays, sequences of ints) use :func:`hash_int64`, strings
    (``str`` sequences, numpy unicode arrays) :func:`hash_str`. The result is ready for
    ``msg.hash_keys``. Mixed or other key types raise ``TypeError``; ints outside int64
    raise ``ValueError``.
    """
    if isinstance(keys, str | bytes | bytearray):
        raise TypeError(
            f"primary keys must be a sequence of keys, not a single {type(keys).__name__}"
        )
    if isinstance(keys, np.ndarray):
        if keys.ndim != 1:
            raise ValueError(f"primary keys must be 1-d, got shape {keys.shape}")
        if keys.dtype.kind in "iu":
            return _to_int_list(hash_int64_array(keys))
        if keys.dtype.kind not in "UO":
            raise TypeError(f"primary keys of dtype {keys.dtype} are neither int64 nor str")
        items: Sequence[Any] = keys.tolist()
    else:
        items = keys
    if len(items) == 0:
        return []
    if all(isinstance(k, str) for k in items):
        return [hash_str(k) for k in items]
    if any(isinstance(k, str) for k in items):
        raise TypeError("primary keys mix str and non-str values")
    checked = np.array([_check_int64(k) for k in items], dtype=np.int64)
    return _to_int_list(hash_int64_array(checked))


# --------------------------------------------------------------------------- repacking

RepackFunc: TypeAlias = Callable[[Sequence[TsMsg], int], dict[int, list[TsMsg]]]
"""``(msgs of one pack, number of producer channels) -> {bucket: [msgs in pack order]}``.

A bucket is an index into the producer channels (``as_producer`` order), ``0 <= bucket <
num_buckets``. Each bucket's list is sent in order to its channel; buckets are sent
concurrently. Buckets without messages may be left out.
"""


_ROW_ROUTED = (InsertMsg, DeleteMsg)
"""Messages routed row by row (one hash key per row)."""


def _describe(msg: TsMsg) -> str:
    return f"{type(msg).__name__}(msg_id={msg.msg_id})"


def _check_num_buckets(num_buckets: int) -> int:
    if type(num_buckets) is int and num_buckets >= 1:  # the usual call: nothing to convert
        return num_buckets
    if isinstance(num_buckets, bool):
        raise TypeError("num_buckets must be an int, not a bool")
    n = operator.index(num_buckets)
    if n < 1:
        raise RoutingError(f"num_buckets must be >= 1, got {n}")
    return n


def _key_bucket(msg: TsMsg, key: Any, num_buckets: int) -> int:
    if isinstance(key, bool | np.bool_):
        raise TypeError(f"{_describe(msg)}: hash key {key!r} is a bool, not an int")
    try:
        return operator.index(key) % num_buckets
    except TypeError:
        raise TypeError(
            f"{_describe(msg)}: hash key {key!r} is a {type(key).__name__}, not an int"
        ) from None


def _first_key_bucket(msg: TsMsg, num_buckets: int) -> int:
    if len(msg.hash_keys) == 0:
        raise RoutingError(
            f"{_describe(msg)} has no hash keys: set msg.hash_keys (e.g. [hash_str(name)]) "
            "to route it, or send it to every channel with broadcast()"
        )
    return _key_bucket(msg, msg.hash_keys[0], num_buckets)


def _row_buckets(msg: InsertMsg | DeleteMsg, num_buckets: int) -> npt.NDArray[np.int64]:
    keys = msg.hash_keys
    array = np.asarray(keys) if len(keys) else np.empty(0, dtype=np.int64)
    if array.ndim == 1 and array.dtype.kind == "i":
        return array.astype(np.int64, copy=False) % np.int64(num_buckets)
    if array.ndim == 1 and array.dtype.kind == "u":
        return (array.astype(np.uint64) % np.uint64(num_buckets)).astype(np.int64)
    return np.array([_key_bucket(msg, k, num_buckets) for k in keys], dtype=np.int64)


def _split_dml(msg: InsertMsg | DeleteMsg, num_buckets: int) -> list[tuple[int, TsMsg]]:
    rows = msg.num_rows
    nkeys = len(msg.hash_keys)
    if rows == 0:
        if nkeys == 1:
            return [(_key_bucket(msg, msg.hash_keys[0], num_buckets), msg)]
        raise RoutingError(
            f"{_describe(msg)} has 0 rows and {nkeys} hash keys: an empty "
            f"{type(msg).__name__} needs exactly one hash key to be routed"
        )
    if nkeys == 1 and rows == 1:  # the common small message: no array work
        return [(_key_bucket(msg, msg.hash_keys[0], num_buckets), msg)]
    if nkeys != rows:
        raise RoutingError(
            f"{_describe(msg)} has {nkeys} hash keys for {rows} rows: set one hash key per "
            "row (e.g. hash_keys=hash_primary_keys(primary_keys))"
        )
    buckets = _row_buckets(msg, num_buckets)
    first = int(buckets[0])
    if bool((buckets == first).all()):
        return [(first, msg)]
    order = np.argsort(buckets, kind="stable")
    sorted_buckets = buckets[order]
    cuts = np.flatnonzero(np.diff(sorted_buckets)) + 1
    out: list[tuple[int, TsMsg]] = []
    for group in np.split(order, cuts):
        indices = group.astype(np.intp, copy=False)
        out.append((int(buckets[indices[0]]), msg.take(indices)))
    return out


def _add(buckets: dict[int, list[TsMsg]], pairs: list[tuple[int, TsMsg]]) -> None:
    for bucket, msg in pairs:
        buckets.setdefault(bucket, []).append(msg)


def _in_order(buckets: dict[int, list[TsMsg]]) -> dict[int, list[TsMsg]]:
    """``buckets`` in ascending bucket order (one bucket, the usual pack, as it is)."""
    return buckets if len(buckets) == 1 else dict(sorted(buckets.items()))


BULK_ROUTING_FROM = 8
"""From this many messages, :func:`default_repack` to one channel first checks the pack in
C-level passes (:func:`_all_routed_whole`); below it the loop costs less than the passes.
(To several channels the loop's grouping costs what the passes would save.)"""
_hash_keys = attrgetter("hash_keys")
_num_rows = attrgetter("num_rows")
_first_key = itemgetter(0)


def _all_routed_whole(msgs: Sequence[TsMsg]) -> bool:
    """Whether :func:`default_repack`'s loop would route every message of ``msgs`` whole by
    its one int key (the usual message: a row-routed one has at most one row), checked a
    pass at a time over the pack. False for any other pack (several keys, keys of another
    type, row-routed and other types mixed), which the loop then routes."""
    keys = list(map(_hash_keys, msgs))
    if set(map(len, keys)) != {1} or set(map(type, map(_first_key, keys))) != {int}:
        return False
    row_routed = {issubclass(cls, _ROW_ROUTED) for cls in set(map(type, msgs))}
    if row_routed == {False}:
        return True
    return row_routed == {True} and max(map(_num_rows, msgs)) <= 1


def default_repack(msgs: Sequence[TsMsg], num_buckets: int) -> dict[int, list[TsMsg]]:
    """Route every message, or every row of an Insert/Delete, to ``hash_key % num_buckets``.

    - :class:`InsertMsg` / :class:`DeleteMsg`: ``hash_keys`` must hold one key per row. Rows
      are grouped by bucket into one message per bucket (via ``msg.take``) holding that
      bucket's rows in their original order; the header (``msg_id``, ``timestamp``,
      ``source_id``) is kept. A message whose rows all fall in one bucket is passed through
      unchanged (the same object). A message with 0 rows is routed by its single hash key.
    - Any other message goes whole to the bucket of its first hash key.

    Within a bucket, messages follow the pack order. The result holds only non-empty
    buckets, in ascending bucket order; ``msgs`` are not modified.

    Raises :class:`RoutingError` (a ``ValueError``) naming the message when an
    Insert/Delete has a different number of hash keys and rows, when an empty one has not
    exactly one hash key, or when any other message has no hash keys (set them, or use
    ``broadcast``); also when ``num_buckets < 1``.
    """
    n = _check_num_buckets(num_buckets)
    if n == 1 and len(msgs) >= BULK_ROUTING_FROM and _all_routed_whole(msgs):
        return {0: list(msgs)}
    buckets: dict[int, list[TsMsg]] = {}
    for msg in msgs:
        bucket = whole_bucket(msg, n)
        if bucket is not None:
            if (found := buckets.get(bucket)) is None:
                buckets[bucket] = [msg]
            else:
                found.append(msg)
        elif isinstance(msg, _ROW_ROUTED):
            _add(buckets, _split_dml(msg, n))
        else:
            _add(buckets, [(_first_key_bucket(msg, n), msg)])
    return _in_order(buckets)


def whole_bucket(msg: TsMsg, num_buckets: int) -> int | None:
    """The bucket :func:`default_repack` routes ``msg`` to whole by its one int hash key:
    the usual message (a row-routed one of at most one row), which it routes without the
    checks and calls of the other cases. None for any other message, whose bucket (or
    error) only ``default_repack`` gives. ``num_buckets`` must be an int >= 1 (unchecked:
    ``default_repack`` checks it once a pack). :class:`MsgStream` routes a one-message
    pack with it when it routes by ``default_repack``, with no buckets to build."""
    keys = msg.hash_keys
    if (
        len(keys) == 1
        and type(keys[0]) is int
        and (not isinstance(msg, _ROW_ROUTED) or msg.num_rows <= 1)
    ):
        return keys[0] % num_buckets
    return None


def repack_by_first_key(msgs: Sequence[TsMsg], num_buckets: int) -> dict[int, list[TsMsg]]:
    """Route every message whole (DML included) to ``hash_keys[0] % num_buckets``.

    Use it when a message must stay on one channel, e.g. all rows of an Insert share a
    partition key. Within a bucket, messages follow the pack order; only non-empty buckets
    appear, in ascending order. A message without hash keys raises :class:`RoutingError`.
    """
    n = _check_num_buckets(num_buckets)
    buckets: dict[int, list[TsMsg]] = {}
    _add(buckets, [(_first_key_bucket(msg, n), msg) for msg in msgs])
    return _in_order(buckets)
