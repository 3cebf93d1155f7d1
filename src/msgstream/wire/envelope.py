"""The wire envelope, declared once: the fixed header in front of every payload.

:data:`FIELDS` lists the envelope's fields in wire order with their :mod:`struct` codes
(little-endian, no padding). Everything else is derived from it: the :class:`struct.Struct`
that packs and unpacks one envelope, the numpy record type that reads many at once, the
size, and each field's position in an unpacked tuple (:func:`index`) and byte offset in a
payload (:func:`offset`). Code that needs a field asks for it by name; no other module
spells a position, an offset or a size. See :mod:`msgstream.wire.codec` for what the fields
mean.
"""

from __future__ import annotations

import struct

import numpy as np

FIELDS: tuple[tuple[str, str], ...] = (
    ("magic", "2s"),
    ("version", "B"),
    ("flags", "B"),
    ("msg_type", "H"),
    ("msg_id", "q"),
    ("timestamp", "Q"),
    ("source_id", "q"),
    ("begin_ts", "Q"),
    ("end_ts", "Q"),
    ("json_len", "I"),
    ("crc", "I"),
)
"""(name, struct code) of each envelope field, in wire order. The crc comes last: it
covers the fields before it and everything after the envelope."""

_ORDER = "<"
NAMES = tuple(name for name, _ in FIELDS)
STRUCT = struct.Struct(_ORDER + "".join(code for _, code in FIELDS))
"""Packs and unpacks one whole envelope (a tuple in :data:`FIELDS` order)."""
SIZE = STRUCT.size


def _numpy_code(code: str) -> str:
    """The numpy type of a struct code (``"2s"`` is ``"S2"``; numbers keep their letter)."""
    return "S" + code[:-1] if code.endswith("s") else _ORDER + code


DTYPE = np.dtype([(name, _numpy_code(code)) for name, code in FIELDS])
"""One envelope as a numpy record: the same bytes as :data:`STRUCT` (packed)."""
assert DTYPE.itemsize == SIZE, "the numpy record must match the struct byte for byte"


def index(name: str) -> int:
    """Where field ``name`` stands in a tuple unpacked by :data:`STRUCT`."""
    return NAMES.index(name)


def offset(name: str) -> int:
    """The byte offset of field ``name`` in a payload."""
    return struct.calcsize(_ORDER + "".join(code for _, code in FIELDS[: index(name)]))


def fields_struct(first: str, last: str) -> struct.Struct:
    """Packs and unpacks the consecutive fields ``first`` to ``last`` (inclusive); read
    them with ``unpack_from(payload, offset(first))``."""
    codes = (code for _, code in FIELDS[index(first) : index(last) + 1])
    return struct.Struct(_ORDER + "".join(codes))


CRC_OFFSET = offset("crc")
assert CRC_OFFSET + struct.calcsize(_ORDER + FIELDS[-1][1]) == SIZE, "the crc must come last"
COVERED = fields_struct(NAMES[0], NAMES[-2])
"""The envelope without its crc: what the encoder packs before computing the crc."""
