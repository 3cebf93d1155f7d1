"""Where a consumer stands in a channel, and where a new subscription starts."""

from __future__ import annotations

import base64
import binascii
import enum
from typing import Any, NamedTuple

import orjson

from ..brief import brief
from ..errors import InvalidPositionError
from .tso import MAX_TIMESTAMP


class SubscriptionPosition(enum.Enum):
    """Where a new subscription starts reading."""

    EARLIEST = "earliest"
    """From the first message still retained in the channel."""
    LATEST = "latest"
    """Only messages produced after the subscription was made."""
    UNKNOWN = "unknown"
    """Nowhere yet: a ``seek`` must follow before anything is read."""


class MsgPosition(NamedTuple):
    """A checkpointable position: a MessageID in a channel, plus the time it stands for.

    ``msg_id`` holds the backend's ``MessageID.to_bytes()``; ``timestamp`` is the time tick
    up to which everything was consumed (for TtMsgStream end positions) or the message's
    own timestamp. Immutable; a named tuple because one is made per consumed message.
    """

    channel: str
    msg_id: bytes
    msg_group: str = ""
    timestamp: int = 0
    examined: int = 0
    """For a TtMsgStream end position: how many messages from this one on (it included)
    the pack's cut had read on the channel. A stream resumed here skips data stamped at or
    below ``timestamp`` only among those (the pack or an earlier one delivered it); a
    message read after them was in no pack, so a late one is delivered as late. 0: not
    known (positions from before this field, other positions): such data is skipped
    until the channel's first tick above ``timestamp``."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "channel": self.channel,
            "msg_id": base64.b64encode(self.msg_id).decode("ascii"),
            "msg_group": self.msg_group,
            "timestamp": self.timestamp,
        }
        if self.examined:
            data["examined"] = self.examined
        return data

    @classmethod
    def from_dict(cls, data: Any) -> MsgPosition:
        if not isinstance(data, dict):
            raise InvalidPositionError(f"a position must be a JSON object, got {brief(data)}")
        try:
            channel = data["channel"]
            raw_id = data["msg_id"]
        except KeyError as exc:
            raise InvalidPositionError(
                f"position {brief(data)} lacks the key {exc.args[0]!r}"
            ) from None
        if not isinstance(channel, str) or not channel:
            raise InvalidPositionError(
                f"position 'channel' must be a non-empty string: {brief(data)}"
            )
        if not isinstance(raw_id, str):
            raise InvalidPositionError(f"position 'msg_id' must be a base64 string: {brief(data)}")
        try:
            msg_id = base64.b64decode(raw_id, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidPositionError(
                f"position 'msg_id' of channel {channel!r} is not valid base64: {brief(raw_id)}"
            ) from None
        timestamp = data.get("timestamp", 0)
        group = data.get("msg_group", "")
        if (
            not isinstance(timestamp, int)
            or isinstance(timestamp, bool)
            or not 0 <= timestamp <= MAX_TIMESTAMP
        ):
            raise InvalidPositionError(
                f"position 'timestamp' of channel {channel!r} must be an int >= 0 "
                f"(unsigned 64-bit): {brief(timestamp)}"
            )
        if not isinstance(group, str):
            raise InvalidPositionError(f"position 'msg_group' must be a string: {brief(group)}")
        examined = data.get("examined", 0)
        if not isinstance(examined, int) or isinstance(examined, bool) or examined < 0:
            raise InvalidPositionError(
                f"position 'examined' of channel {channel!r} must be an int >= 0: {brief(examined)}"
            )
        return cls(channel, msg_id, group, timestamp, examined)

    def to_json(self) -> str:
        return orjson.dumps(self.to_dict()).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> MsgPosition:
        try:
            return cls.from_dict(orjson.loads(text))
        except orjson.JSONDecodeError as exc:
            raise InvalidPositionError(f"position is not valid JSON: {exc}") from None


def positions_to_json(positions: list[MsgPosition]) -> str:
    """Serialise a list of positions (e.g. a pack's ``end_positions``) for a checkpoint."""
    return orjson.dumps([p.to_dict() for p in positions]).decode()


def positions_from_json(text: str | bytes) -> list[MsgPosition]:
    """Parse what :func:`positions_to_json` wrote; a single position object is accepted too."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidPositionError(f"positions are not valid JSON: {exc}") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise InvalidPositionError(f"positions must be a JSON list, got {type(data).__name__}")
    return [MsgPosition.from_dict(item) for item in data]
