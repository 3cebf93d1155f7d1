"""Slice offsets: a common time tick plus, per channel, where reading resumes after it.

A :class:`SliceOffset` ``(tick, positions, examined)`` marks the boundary between two time
slices across all channels: every row with timestamp ``<= tick`` lies before it, every row
with a larger timestamp after it. ``positions[c]`` is the MessageID (bytes) of the first
message of channel ``c`` whose timestamp is above ``tick`` -- or an earlier one, since
readers drop what is at or below ``tick`` -- and ``None`` for the channel's very beginning.
``examined[c]`` says how many messages from that position on the slice ending at ``tick``
had read: readers drop data at or below ``tick`` only among those, so a late message
written after them is delivered, not dropped (absent or 0: not known; dropped until the
channel's first tick above ``tick``, the rule before this was recorded). This is the
resume contract of a :class:`~msgstream.TtMsgStream` pack's ``end_positions``
(``MsgPosition.examined``), so the two convert into each other
(:meth:`SliceOffset.from_positions`, :meth:`SliceOffset.to_positions`). Both count the
messages their reader passes to the tick rules; a damaged message, which a slice reader
counts and a TtMsgStream's reader drops before its barrier, makes a converted count one off.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from msgstream.errors import InvalidPositionError
from msgstream.wire.position import MsgPosition, positions_from_json

from ..errors import OptionError

EARLIEST = "earliest"
LATEST = "latest"


@dataclass(frozen=True)
class SliceOffset:
    tick: int
    positions: Mapping[str, bytes | None]
    examined: Mapping[str, int] = field(default_factory=dict)
    """Per channel, messages from its position on that the slice ending here had read
    (absent: not known)."""

    @classmethod
    def earliest(cls, channels: Sequence[str]) -> SliceOffset:
        return cls(0, {c: None for c in channels})

    @property
    def channels(self) -> list[str]:
        return list(self.positions)

    # --- Spark's offset JSON --------------------------------------------------------------
    def to_spark(self) -> dict[str, Any]:
        """A JSON-friendly dict; equal offsets give equal JSON (Spark compares the text)."""
        data: dict[str, Any] = {
            "tick": self.tick,
            "positions": {
                c: None if p is None else base64.b64encode(p).decode("ascii")
                for c, p in self.positions.items()
            },
        }
        examined = {c: self.examined[c] for c in self.positions if self.examined.get(c)}
        if examined:
            data["examined"] = examined
        return data

    @classmethod
    def from_spark(cls, data: Any, channels: Sequence[str], what: str = "offset") -> SliceOffset:
        """Parse :meth:`to_spark`'s output; its channels must be exactly ``channels``."""
        if not isinstance(data, Mapping) or not {"tick", "positions"} <= set(data) <= {
            "tick",
            "positions",
            "examined",
        }:
            raise InvalidPositionError(
                f"{what} must be an object with 'tick', 'positions' and optionally "
                f"'examined', got {data!r}"
            )
        tick, raw = data["tick"], data["positions"]
        if not isinstance(tick, int) or isinstance(tick, bool) or tick < 0:
            raise InvalidPositionError(f"{what}: 'tick' must be an int >= 0, got {tick!r}")
        if not isinstance(raw, Mapping):
            raise InvalidPositionError(f"{what}: 'positions' must be an object, got {raw!r}")
        _same_channels(list(raw), channels, what)
        positions: dict[str, bytes | None] = {}
        for channel in channels:
            value = raw[channel]
            if value is None:
                positions[channel] = None
                continue
            if not isinstance(value, str):
                raise InvalidPositionError(
                    f"{what}: position of channel {channel!r} must be base64 text or null"
                )
            try:
                positions[channel] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidPositionError(
                    f"{what}: position of channel {channel!r} is not valid base64: {value!r}"
                ) from None
        return cls(tick, positions, _examined(data.get("examined", {}), channels, what))

    # --- TtMsgStream positions --------------------------------------------------------------
    @classmethod
    def from_positions(
        cls, positions: Sequence[MsgPosition], channels: Sequence[str], what: str = "positions"
    ) -> SliceOffset:
        """From a pack's ``end_positions``: one per channel, all at one time tick."""
        _same_channels([p.channel for p in positions], channels, what)
        ticks = {p.timestamp for p in positions}
        if len(ticks) != 1:
            detail = ", ".join(f"{p.channel}={p.timestamp}" for p in positions)
            raise InvalidPositionError(
                f"{what} must all stand at one common time tick, got {detail}"
            )
        by_channel = {p.channel: p for p in positions}
        return cls(
            ticks.pop(),
            {c: by_channel[c].msg_id for c in channels},
            {c: by_channel[c].examined for c in channels if by_channel[c].examined},
        )

    def to_positions(self, subscription: str = "") -> list[MsgPosition] | None:
        """As ``MsgPosition``s for ``TtMsgStream.seek``; None while a channel is at its
        beginning (there is no MessageID to seek to: subscribe at EARLIEST instead)."""
        if any(p is None for p in self.positions.values()):
            return None
        return [
            MsgPosition(c, p, subscription, self.tick, self.examined.get(c, 0))
            for c, p in self.positions.items()
            if p is not None
        ]


def _examined(raw: Any, channels: Sequence[str], what: str) -> dict[str, int]:
    """The ``examined`` counts of an offset's JSON: ints >= 0 for some of ``channels``."""
    if not isinstance(raw, Mapping):
        raise InvalidPositionError(f"{what}: 'examined' must be an object, got {raw!r}")
    out: dict[str, int] = {}
    for channel, count in raw.items():
        if channel not in channels:
            raise InvalidPositionError(
                f"{what}: 'examined' names channel {channel!r}, which the job does not read"
            )
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InvalidPositionError(
                f"{what}: 'examined' of channel {channel!r} must be an int >= 0, got {count!r}"
            )
        if count:
            out[channel] = count
    return out


def _same_channels(given: list[str], channels: Sequence[str], what: str) -> None:
    if len(set(given)) != len(given):
        raise InvalidPositionError(f"{what}: a channel appears more than once in {given}")
    missing = [c for c in channels if c not in given]
    extra = [c for c in given if c not in channels]
    if missing or extra:
        raise InvalidPositionError(
            f"{what} cover channels {sorted(given)}, but the job reads {list(channels)}"
            f" (missing {missing}, not read {extra})"
        )


StartSpec = str | SliceOffset
"""``"earliest"``, ``"latest"`` or an explicit offset."""


def parse_start(
    value: str | Sequence[MsgPosition] | SliceOffset,
    channels: Sequence[str],
    option: str = "startingPositions",
) -> StartSpec:
    """``earliest``, ``latest``, a JSON list of positions (``positions_to_json`` of a
    pack's ``end_positions``), a Spark offset object, or ``@file`` holding either."""
    if isinstance(value, SliceOffset):
        _same_channels(value.channels, channels, option)
        return value
    if not isinstance(value, str):
        return SliceOffset.from_positions(list(value), channels, option)
    text = value.strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise OptionError(option, f"cannot read {text[1:]}: {exc.strerror or exc}") from exc
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise OptionError(
            option, f"expected earliest, latest, JSON positions or @file, got {value!r}"
        ) from None
    try:
        if isinstance(data, Mapping) and "tick" in data:
            return SliceOffset.from_spark(data, channels, option)
        return SliceOffset.from_positions(positions_from_json(text), channels, option)
    except InvalidPositionError as exc:
        raise OptionError(option, str(exc)) from None
