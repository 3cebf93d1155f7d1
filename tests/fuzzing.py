"""Fuzzing msgstream's parsers: nothing read from outside may raise anything but its
documented error.

* ``decode`` / ``decode_batch``: random bytes and mutated real payloads of every message
  type (bit flips, truncations, splices, garbage, and the same with the checksum fixed so
  the body checks are reached) give a message or a :class:`~msgstream.DecodeError`.
* ``positions_from_json``: random and mutated positions JSON give positions or an
  :class:`~msgstream.InvalidPositionError`.
* ``config_from_dict`` / ``load_config``: random and mutated config documents (dicts,
  YAML text, environment overrides) give a :class:`~msgstream.Config` or a
  :class:`~msgstream.ConfigError`.

The CI run (tests/test_fuzz.py) uses a fixed seed; ``make fuzz`` runs longer, with a new
seed each time unless ``FUZZ_SEED`` is given (the seed is printed first)::

    FUZZ_ITERATIONS=1000000 FUZZ_SEED=7 python tests/fuzzing.py

``FUZZ_ITERATIONS`` is the number of decode payloads (default 100,000); positions and
config documents get a tenth of it each. Plain ``random.Random(seed)`` keeps a run
reproducible from its seed. Exit status 1 and the first input of each kind of failure
(error type and place) on stderr when anything else than the documented error escaped.
"""

from __future__ import annotations

import json
import os
import random
import struct
import sys
import tempfile
import time
import traceback
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import orjson
import yaml
from pydantic import SecretStr

from msgstream import (
    CollectionSchema,
    ConfigError,
    CreateCollectionMsg,
    CreatePartitionMsg,
    DataType,
    DecodeError,
    DeleteMsg,
    DropCollectionMsg,
    DropPartitionMsg,
    FieldData,
    FieldSchema,
    InsertMsg,
    InvalidPositionError,
    MessageRegistry,
    MsgPosition,
    TimeTickMsg,
    TsMsg,
    config_from_dict,
    load_config,
    positions_from_json,
    positions_to_json,
)
from msgstream.configuration.config import Config, config_keys
from msgstream.wire.codec import ENVELOPE_SIZE, decode, decode_batch, encode, to_jsonable
from msgstream.wire.messages import BUILTIN_TYPES

DEFAULT_ITERATIONS = 100_000
DEFAULT_SEED = 20261123
_CRC_AT = ENVELOPE_SIZE - 4
_FIELDS_AT = struct.Struct("<2sBBHqQqQQI")  # the envelope without its crc
_JSON_LEN_AT = _FIELDS_AT.size - 4
_TYPE_AT = 4


# --------------------------------------------------------------------------- corpus


@dataclass(kw_only=True, eq=False, repr=False)
class NoteMsg(TsMsg):
    """A user message type: a JSON-only body with str, int and nested fields."""

    MSG_TYPE: ClassVar[int] = 1000

    text: str = ""
    count: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


NOTE = NoteMsg
REGISTRY = MessageRegistry(BUILTIN_TYPES)
REGISTRY.register(NOTE)


def _schema() -> CollectionSchema:
    return CollectionSchema(
        "c",
        (
            FieldSchema("pk", DataType.INT64, is_primary=True),
            FieldSchema("vec", DataType.FLOAT_VECTOR, dim=3),
            FieldSchema("name", DataType.VARCHAR, nullable=True, description="d"),
        ),
        description="fuzz",
    )


def _every_column(rows: int) -> list[FieldData]:
    """One column of every data type, some with validity masks and nulls."""
    rng = np.random.default_rng(rows)
    mask = [i % 3 != 1 for i in range(rows)]
    return [
        FieldData("b", DataType.BOOL, [i % 2 == 0 for i in range(rows)]),
        FieldData("i8", DataType.INT8, list(range(-rows, 0))),
        FieldData("i16", DataType.INT16, [i * 300 for i in range(rows)]),
        FieldData("i32", DataType.INT32, [i * 70_000 for i in range(rows)], valid=mask),
        FieldData("i64", DataType.INT64, [i * 2**40 for i in range(rows)]),
        FieldData("f", DataType.FLOAT, rng.random(rows, dtype=np.float32)),
        FieldData("d", DataType.DOUBLE, rng.random(rows)),
        FieldData("s", DataType.VARCHAR, [None if i % 3 == 1 else f"s{i}" for i in range(rows)]),
        FieldData("j", DataType.JSON, [{"k": i, "l": [i, None]} for i in range(rows)]),
        FieldData(
            "bin", DataType.BINARY, [None if i % 4 == 3 else bytes([i]) * i for i in range(rows)]
        ),
        FieldData("v", DataType.FLOAT_VECTOR, rng.random((rows, 3), dtype=np.float32), dim=3),
    ]


def _numeric_columns(rows: int) -> list[FieldData]:
    """Only columns a decode plan handles (numeric, bool, vectors)."""
    return [
        FieldData("pk", DataType.INT64, list(range(rows))),
        FieldData("ok", DataType.BOOL, [True] * rows, valid=[i % 2 == 0 for i in range(rows)]),
        FieldData("v", DataType.FLOAT_VECTOR, np.ones((rows, 2), dtype=np.float32), dim=2),
    ]


def sample_messages() -> list[TsMsg]:
    """A message of every type, Inserts with every field type."""
    return [
        TimeTickMsg(msg_id=1, timestamp=10, source_id=1),
        InsertMsg(
            msg_id=2,
            timestamp=20,
            source_id=2,
            collection_name="c",
            partition_name="p",
            row_ids=list(range(5)),
            row_timestamps=[15, 20, 18, 16, 19],
            fields=_every_column(5),
        ),
        InsertMsg(
            msg_id=3, timestamp=30, collection_name="c", row_ids=[7], fields=_every_column(1)
        ),
        InsertMsg(
            msg_id=4,
            timestamp=40,
            collection_name="c",
            row_ids=[1, 2, 3],
            fields=_numeric_columns(3),
        ),
        InsertMsg(msg_id=5, timestamp=50, collection_name="c"),
        DeleteMsg(msg_id=6, timestamp=60, collection_name="c", primary_keys=[1, 2, 3]),
        DeleteMsg(
            msg_id=7,
            timestamp=70,
            collection_name="c",
            primary_keys=["x", "", "zz"],
            row_timestamps=[65, 70, 66],
        ),
        CreateCollectionMsg(
            msg_id=8, timestamp=80, collection_name="c", schema=_schema(), collection_id=4
        ),
        DropCollectionMsg(msg_id=9, timestamp=90, collection_name="c", collection_id=4),
        CreatePartitionMsg(msg_id=10, timestamp=100, collection_name="c", partition_name="p"),
        DropPartitionMsg(msg_id=11, timestamp=110, collection_name="c", partition_name="p"),
        NOTE(msg_id=12, timestamp=120, text="note", count=3, extra={"a": [1, {"b": None}]}),
    ]


CORPUS = [encode(m, REGISTRY) for m in sample_messages()]


# --------------------------------------------------------------------------- random values

_NASTY_INTS = [
    0,
    1,
    -1,
    2,
    7,
    255,
    2**31,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    2**64 - 1,
    2**64,
    -(2**63) - 1,
    10**30,
    -(10**30),
]
_NASTY_FLOATS = [0.0, -0.0, 0.5, 1e308, -1e308, 1e-320, float("nan"), float("inf")]
_NASTY_STRS = [
    "",
    "x",
    "_default",
    "float_vector",
    "int64",
    "varchar",
    "binary",
    "json",
    "bool",
    "\x00",
    "\ud7ff\u2028",
    "é" * 40,
    "kafka",
    "rocksmq",
    "memory",
    "pulsar",
    "deliver",
    "reject",
    "all",
    "-1",
    "1",
    "true",
    "null",
    "AAAA",
    "AAA=",
    "!!",
    "0" * 300,
]


def random_scalar(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.1:
        return None
    if pick < 0.2:
        return rng.random() < 0.5
    if pick < 0.45:
        return rng.choice(_NASTY_INTS) if rng.random() < 0.5 else rng.randint(-1000, 1000)
    if pick < 0.55:
        return rng.choice(_NASTY_FLOATS) if rng.random() < 0.5 else rng.uniform(-1e6, 1e6)
    if rng.random() < 0.5:
        return rng.choice(_NASTY_STRS)
    return "".join(
        chr(rng.choice((rng.randint(32, 126), rng.randint(0, 0xD7FF))))
        for _ in range(rng.randint(0, 12))
    )


def random_json(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON-able value: nasty scalars, lists, dicts (rarely deep)."""
    pick = rng.random()
    if depth > 4 or pick < 0.6:
        return random_scalar(rng)
    if pick < 0.8:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = [
        "o",
        "n",
        "name",
        "dtype",
        "rows",
        "dim",
        "buf",
        "valid",
        "lens",
        "nulls",
        "values",
        "channel",
        "msg_id",
        "timestamp",
        "msg_group",
        "x",
    ]
    return {
        (rng.choice(keys) if rng.random() < 0.7 else str(random_scalar(rng))): random_json(
            rng, depth + 1
        )
        for _ in range(rng.randint(0, 4))
    }


def to_json_text(value: Any) -> bytes:
    """JSON text of ``value`` (stdlib: big ints and NaN are written, as a hostile peer may)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every node of a JSON value, as a path of keys and indices."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.extend(paths(item, (*prefix, index)))
    return out


def replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = replace(copy[head], rest, new)
    return copy


def delete(value: Any, path: tuple[Any, ...]) -> Any:
    """``value`` without the node at ``path`` (the root stays)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if rest:
        if isinstance(value, dict):
            return {**value, head: delete(value[head], rest)}
        copy = list(value)
        copy[head] = delete(copy[head], rest)
        return copy
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != head}
    return [v for i, v in enumerate(value) if i != head]


def mutate_json(
    rng: random.Random, value: Any, steps: int, nodes: list[tuple[Any, ...]] | None = None
) -> Any:
    """Replace, delete or duplicate random nodes of ``value`` (``nodes``: its paths, if
    known already)."""
    for step in range(steps):
        nodes = nodes if step == 0 and nodes is not None else paths(value)
        path = rng.choice(nodes)
        action = rng.random()
        if action < 0.6 or not path:
            value = replace(value, path, random_json(rng))
        elif action < 0.85:
            value = delete(value, path)
        else:  # copy another node here (a plausible but wrong value)
            other = rng.choice(nodes)
            node = value
            for key in other:
                node = node[key]
            value = replace(value, path, node)
    return value


def mutate_bytes(rng: random.Random, data: bytes, donors: list[bytes]) -> bytes:
    """One byte-level mutation: flip, set, truncate, splice, insert, delete, overwrite."""
    buf = bytearray(data)
    kind = rng.randrange(7)
    if not buf:
        kind = 4
    i = rng.randrange(len(buf) + 1)
    if kind == 0 and i < len(buf):
        for _ in range(rng.randint(1, 4)):
            j = rng.randrange(len(buf))
            buf[j] ^= 1 << rng.randrange(8)
    elif kind == 1 and i < len(buf):
        buf[i] = rng.randrange(256)
    elif kind == 2:
        del buf[i:]
    elif kind == 3:
        donor = rng.choice(donors)
        buf = buf[:i] + donor[rng.randrange(len(donor) + 1) :]
    elif kind == 4:
        buf[i:i] = rng.randbytes(rng.randint(1, 16))
    elif kind == 5:
        del buf[i : i + rng.randint(1, 16)]
    else:
        n = rng.randint(1, 32)
        buf[i : i + n] = rng.randbytes(n)
    return bytes(buf)


# --------------------------------------------------------------------------- payloads


def fix_crc(data: bytes) -> bytes:
    """``data`` with the envelope's checksum made right (so the body checks are reached)."""
    if len(data) < ENVELOPE_SIZE:
        return data
    crc = zlib.crc32(data[ENVELOPE_SIZE:], zlib.crc32(data[:_CRC_AT]))
    return data[:_CRC_AT] + crc.to_bytes(4, "little") + data[ENVELOPE_SIZE:]


def split(payload: bytes) -> tuple[bytes, bytes, bytes]:
    """(envelope, JSON body, side buffers) of a well-formed payload."""
    json_len = int.from_bytes(payload[_JSON_LEN_AT : _JSON_LEN_AT + 4], "little")
    end = ENVELOPE_SIZE + json_len
    return payload[:ENVELOPE_SIZE], payload[ENVELOPE_SIZE:end], payload[end:]


def join(envelope: bytes, body: bytes, area: bytes) -> bytes:
    """A payload with this body and side buffers; json_len and the checksum made right."""
    head = envelope[:_JSON_LEN_AT] + (len(body) & 0xFFFFFFFF).to_bytes(4, "little")
    return fix_crc(head + b"\0\0\0\0" + body + area)


def set_field(envelope: bytes, rng: random.Random) -> bytes:
    """An envelope with one header field set to a random (often edge) value."""
    fields = list(_FIELDS_AT.unpack_from(envelope))
    index = rng.randrange(1, len(fields))
    limits = {1: 8, 2: 8, 3: 16, 4: 64, 5: 64, 6: 64, 7: 64, 8: 64, 9: 32}
    bits = limits[index]
    signed = index in (4, 6)
    if index == 3 and rng.random() < 0.7:  # the type code: known, near known, or user range
        value = rng.choice([*range(0, 9), 999, 1000, 1001, 65535])
    else:
        value = rng.choice([0, 1, 2, (1 << bits) - 1, (1 << (bits - 1)) - 1, rng.getrandbits(bits)])
        if signed and value >= 1 << (bits - 1):
            value -= 1 << bits
    fields[index] = value
    return _FIELDS_AT.pack(*fields) + envelope[_FIELDS_AT.size :]


def mutated_payload(rng: random.Random) -> bytes:
    """A payload to decode: random, or a real one mutated, most with a right checksum."""
    pick = rng.random()
    if pick < 0.05:
        return rng.randbytes(rng.randint(0, 200))
    if pick < 0.1:
        return fix_crc(b"MS\x02" + rng.randbytes(rng.randint(0, 200)))
    index = rng.randrange(len(CORPUS))
    payload = CORPUS[index]
    envelope, body, area = PARTS[index]
    if pick < 0.35:  # bytes anywhere; checksum fixed half the time
        data = payload
        for _ in range(rng.randint(1, 3)):
            data = mutate_bytes(rng, data, CORPUS)
        return fix_crc(data) if rng.random() < 0.5 else data
    if pick < 0.45:  # header fields, checksum fixed
        return fix_crc(set_field(envelope, rng) + body + area)
    if pick < 0.6:  # JSON body bytes
        return join(envelope, mutate_bytes(rng, body, BODIES), area)
    if pick < 0.7:  # side buffers
        return join(envelope, body, mutate_bytes(rng, area, [b"\0" * 64, rng.randbytes(64)]))
    # the JSON structure: a node replaced, deleted or copied elsewhere
    tree = mutate_json(rng, TREES[index], rng.randint(1, 3), NODES[index])
    new_area = area if rng.random() < 0.8 else mutate_bytes(rng, area, [rng.randbytes(32)])
    return join(envelope, to_json_text(tree), new_area)


PARTS = [split(p) for p in CORPUS]
PRINTED: list[bytes | None] = []  # filled below, once printed() is defined
BODIES = [body for _, body, _ in PARTS]
TREES = [orjson.loads(body) for body in BODIES]
NODES = [paths(tree) for tree in TREES]


# --------------------------------------------------------------------------- running


@dataclass
class Finding:
    """An input that raised something other than the target's documented error."""

    target: str
    data: Any
    error: str

    def __str__(self) -> str:
        shown = repr(self.data)
        if len(shown) > 600:
            shown = shown[:600] + f"... ({len(shown)} characters)"
        return f"{self.target}: {self.error}  input: {shown}"


@dataclass
class Report:
    target: str
    inputs: int = 0
    accepted: int = 0
    rejected: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    failures: int = 0
    _kinds: set[str] = field(default_factory=set)

    def add(self, data: Any, exc: BaseException) -> None:
        """Count a finding; keep the first input of each kind (error type and place)."""
        self.failures += 1
        frames = traceback.extract_tb(exc.__traceback__)
        place = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        kind = f"{type(exc).__name__} at {place}"
        if kind not in self._kinds and len(self._kinds) < 20:
            self._kinds.add(kind)
            text = "".join(traceback.format_exception(exc, limit=-3))
            self.findings.append(Finding(self.target, data, f"{kind}\n{text}"))

    def line(self) -> str:
        return (
            f"{self.target:<20} {self.inputs:>9} inputs  {self.accepted:>8} accepted  "
            f"{self.rejected:>8} rejected  {self.failures:>5} findings  {self.seconds:6.2f} s"
        )


def printed(msg: TsMsg) -> bytes:
    """A message's content as JSON, position left out (NaN prints as null, so two
    messages holding NaN at the same places print the same)."""
    shown = to_jsonable(msg)
    shown.pop("position", None)
    shown["range"] = msg.time_range()
    return orjson.dumps(shown, option=orjson.OPT_SERIALIZE_NUMPY)


PRINTED.extend(printed(decode(p, REGISTRY)) for p in CORPUS)


def fuzz_decode(rng: random.Random, iterations: int, batch_every: int = 8) -> Report:
    """``iterations`` payloads through ``decode``; in groups of ``batch_every`` (with a
    sound payload mixed in, whose plan is cached) also through ``decode_batch``, which must
    reject the same payloads and build the same messages."""
    report = Report("decode")
    start = time.process_time()
    pending: list[tuple[bytes, bytes | None]] = []
    for _ in range(iterations):
        data = mutated_payload(rng)
        report.inputs += 1
        shown = None
        try:
            msg = decode(data, REGISTRY)
        except DecodeError:
            report.rejected += 1
        except Exception as exc:
            report.add(data, exc)
            continue
        else:
            report.accepted += 1
            try:
                shown = _check_decoded(msg, data)
            except Exception as exc:
                report.add(data, exc)
                continue
        pending.append((data, shown))
        if len(pending) >= batch_every:
            _check_batch(rng, pending, report)
            pending = []
    if pending:
        _check_batch(rng, pending, report)
    report.seconds = time.process_time() - start
    return report


def _check_decoded(msg: TsMsg, data: bytes) -> bytes:
    """What decodes must re-encode and decode to the same; return how it prints."""
    if msg.size != len(data):
        raise AssertionError(f"size {msg.size} != {len(data)}")
    shown = printed(msg)
    again = decode(encode(msg, REGISTRY), REGISTRY)
    if type(again) is not type(msg) or printed(again) != shown:
        raise AssertionError(f"re-encoded {type(msg).__name__} decodes differently")
    return shown


def _check_batch(
    rng: random.Random, pending: list[tuple[bytes, bytes | None]], report: Report
) -> None:
    index = rng.randrange(len(CORPUS))
    mixed = [*pending, (CORPUS[index], PRINTED[index])]
    rng.shuffle(mixed)
    payloads = [p for p, _ in mixed]
    try:
        batch = decode_batch(payloads, REGISTRY)
        bad = {index for index, _ in batch.bad}
        for _, exc in batch.bad:
            if not isinstance(exc, DecodeError):
                raise AssertionError(f"decode_batch reported {type(exc).__name__}: {exc}")
        expected_bad = {i for i, (_, shown) in enumerate(mixed) if shown is None}
        if bad != expected_bad:
            raise AssertionError(
                f"decode_batch rejected {sorted(bad)}, decode {sorted(expected_bad)}"
            )
        rows = [i for i in range(len(mixed)) if i not in bad]
        for row, index in enumerate(rows):
            built = batch.plans[row].build(
                batch.msg_ids[row],
                batch.stamps[row],
                batch.sources[row],
                payloads[index],
                b"id",
                ("ch", "sub"),
            )
            if printed(built) != mixed[index][1]:
                raise AssertionError(
                    f"decode_batch built another {type(built).__name__} from {payloads[index]!r}"
                )
    except Exception as exc:
        report.add(payloads, exc)


def _valid_positions(rng: random.Random) -> list[dict[str, Any]]:
    return [
        MsgPosition(
            f"ch-{rng.randrange(10)}",
            rng.randbytes(rng.randint(0, 24)),
            rng.choice(["", "g", "sub"]),
            rng.choice([0, 1, 2**64 - 1, rng.getrandbits(64)]),
        ).to_dict()
        for _ in range(rng.randint(1, 3))
    ]


def positions_input(rng: random.Random) -> bytes | str:
    pick = rng.random()
    valid = _valid_positions(rng)
    if pick < 0.1:
        return rng.randbytes(rng.randint(0, 80))
    if pick < 0.25:
        return to_json_text(random_json(rng))
    if pick < 0.35:  # deep nesting
        depth = rng.choice([10, 500, 1023, 1024, 1025, 5000])
        return (
            "[" * depth + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth
        )
    text = to_json_text(valid if rng.random() < 0.7 else valid[0])
    if pick < 0.6:
        for _ in range(rng.randint(1, 3)):
            text = mutate_bytes(rng, text, [b'{"channel":', b'"msg_id":"', b"]", b"}", b"null"])
        return text.decode("utf-8", "replace") if rng.random() < 0.3 else text
    return to_json_text(mutate_json(rng, valid, rng.randint(1, 3)))


def fuzz_positions(rng: random.Random, iterations: int) -> Report:
    report = Report("positions_from_json")
    start = time.process_time()
    for _ in range(iterations):
        text = positions_input(rng)
        report.inputs += 1
        try:
            positions = positions_from_json(text)
        except InvalidPositionError:
            report.rejected += 1
            continue
        except Exception as exc:
            report.add(text, exc)
            continue
        report.accepted += 1
        try:
            if positions_from_json(positions_to_json(positions)) != positions:
                raise AssertionError("positions do not survive a round trip")
        except Exception as exc:
            report.add(text, exc)
    report.seconds = time.process_time() - start
    return report


_SPECS = list(config_keys())


def _valid_config(rng: random.Random) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for spec in rng.sample(_SPECS, rng.randint(0, 8)):
        if spec.choices:
            value: Any = rng.choice(spec.choices)
        elif spec.kind is bool:
            value = rng.random() < 0.5
        elif spec.kind is int:
            value = rng.randint(1, 10_000)
        elif spec.kind is float:
            value = rng.uniform(0.1, 100.0)
        elif spec.kind is dict:
            value = {"k": rng.choice(["v", 1, True, 2.5])}
        else:
            value = rng.choice(["x", "localhost:9092", "/tmp/fuzz-store"])
        doc.setdefault(spec.section, {})[spec.name] = value
    return doc


def config_input(rng: random.Random) -> tuple[Any, dict[str, str]]:
    """A config document (possibly not a dict at all) and environment overrides."""
    doc: Any = _valid_config(rng)
    pick = rng.random()
    if pick < 0.1:
        doc = random_json(rng)
    elif pick < 0.6:
        spec = rng.choice(_SPECS)
        doc.setdefault(spec.section, {})[spec.name] = random_json(rng)
        if rng.random() < 0.3:
            doc = mutate_json(rng, doc, rng.randint(1, 2))
    elif pick < 0.7:
        doc[rng.choice([spec.section for spec in _SPECS])] = random_json(rng)
    elif pick < 0.71:  # nested deeper than a plain repr can recurse
        deep: Any = rng.choice([[], {}, "x"])
        for _ in range(3000):
            deep = [deep] if rng.random() < 0.5 else {"k": deep}
        spec = rng.choice(_SPECS)
        doc.setdefault(spec.section, {})[spec.name] = deep
    env: dict[str, str] = {}
    if rng.random() < 0.2:
        spec = rng.choice(_SPECS)
        text = random_scalar(rng)
        env[spec.env_var] = text if isinstance(text, str) else json.dumps(text)
        if rng.random() < 0.2:
            env["MSGSTREAM_" + rng.choice(["MQ_TYP", "X", "ROCKSMQ_PATHS", "CONFIG", "TEST_X"])] = (
                "1"
            )
    return doc, env


def yaml_text(rng: random.Random, doc: Any) -> bytes:
    """YAML text of ``doc``, sometimes mutated, sometimes with YAML-only constructs."""
    try:  # JSON is YAML too, and much faster to write
        if rng.random() < 0.5:
            text = to_json_text(doc)
        else:
            text = yaml.safe_dump(doc, allow_unicode=True).encode("utf-8", "surrogatepass")
    except (yaml.YAMLError, ValueError, RecursionError):
        text = b"mq: {}\n"
    pick = rng.random()
    if pick < 0.4:
        for _ in range(rng.randint(1, 3)):
            text = mutate_bytes(
                rng, text, [b": ", b"\n  ", b"- ", b"&a ", b"*a", b"!!", b"{", b"["]
            )
    elif pick < 0.6:
        extras = [
            b"mq: &a {type: memory}\nmemory: *a\n",
            b"? [a, b]\n: 1\n",
            b"mq:\n  type: !!binary aGk=\n",
            b"msgstream:\n  tick_interval_s: .nan\n",
            b"msgstream:\n  receive_buffer_size: 0x10\n",
            b"rocksmq:\n  path: 2001-12-14\n",
            b"rocksmq: &x [*x]\n",
            b"mq: !!python/object:os.system {}\n",
            b"\xef\xbb\xbfmq: {type: kafka}\n",
            b"mq:\n  type: " + b"[" * 40 + b"]" * 40 + b"\n",
            b"%YAML 1.1\n---\nmq: {}\n---\nmq: {}\n",
            b"\x00\xff\xfe",
        ]
        text = rng.choice(extras)
    return text


DEEP_YAML = [
    b"mq:\n  type: " + b"[" * 600 + b"]" * 600 + b"\n",
    b"rocksmq: " + b"{a: " * 600 + b"1" + b"}" * 600 + b"\n",
    b"".join(b"  " * i + b"k:\n" for i in range(600)),
]
"""Documents nested deeper than PyYAML can recurse."""


def fuzz_config(rng: random.Random, iterations: int, workdir: Path) -> Report:
    """Config dicts through ``config_from_dict``; every sixth one as YAML text through
    ``load_config``."""
    report = Report("config")
    start = time.process_time()
    path = workdir / "msgstream.yaml"
    for n in range(iterations):
        doc, env = config_input(rng)
        report.inputs += 1
        as_yaml = n < len(DEEP_YAML) or n % 6 == 5
        if as_yaml:
            # Deep documents are slow to parse (PyYAML is quadratic in depth): once a run.
            text = DEEP_YAML[n] if n < len(DEEP_YAML) else yaml_text(rng, doc)
            path.write_bytes(text)
        shown = ((text if as_yaml else doc), env)
        try:
            cfg = load_config(path, env) if as_yaml else config_from_dict(doc, env)
        except ConfigError:
            report.rejected += 1
            continue
        except Exception as exc:
            report.add(shown, exc)
            continue
        report.accepted += 1
        try:
            config_from_dict(revealed_dict(cfg), {})
        except Exception as exc:
            report.add(shown, exc)
    report.seconds = time.process_time() - start
    return report


def revealed_dict(cfg: Config) -> dict[str, Any]:
    """``cfg`` as plain data with every secret's value in place of the mask ``to_dict``
    shows: an accepted configuration, dumped, must load again (a mask is refused as a
    secret)."""

    def reveal(value: Any) -> Any:
        if isinstance(value, SecretStr):
            return value.get_secret_value()
        if isinstance(value, dict):
            return {key: reveal(item) for key, item in value.items()}
        return value

    return {name: reveal(section.model_dump()) for name, section in cfg.sections().items()}


def run(iterations: int = DEFAULT_ITERATIONS, seed: int = DEFAULT_SEED) -> list[Report]:
    """Every target with ``random.Random(seed)``: ``iterations`` decode payloads, a tenth
    of that for positions and for config documents."""
    rng = random.Random(seed)
    small = max(1, iterations // 10)
    with tempfile.TemporaryDirectory(prefix="msgstream-fuzz-") as tmp:
        return [
            fuzz_decode(rng, iterations),
            fuzz_positions(rng, small),
            fuzz_config(rng, small, Path(tmp)),
        ]


def main() -> int:
    iterations = int(os.environ.get("FUZZ_ITERATIONS") or DEFAULT_ITERATIONS)
    seed = int(os.environ.get("FUZZ_SEED") or random.SystemRandom().getrandbits(32))
    print(f"fuzzing with seed {seed} (FUZZ_SEED={seed} repeats it), {iterations} decode payloads")
    reports = run(iterations, seed)
    for report in reports:
        print(report.line())
    findings = [f for r in reports for f in r.findings]
    for finding in findings:
        print(finding, file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
