"""How the CLI prints messages, packs and MessageIDs."""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson

from ..contract.backend import Client, MessageID
from ..errors import MsgStreamError
from ..wire.codec import to_jsonable
from ..wire.messages import DeleteMsg, InsertMsg, TsMsg
from ..wire.pack import MsgPack
from ..wire.schema import DataType

_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=_JSON_OPTIONS, default=str).decode()


def msg_to_json(msg: TsMsg, *, full_vectors: bool = False) -> dict[str, Any]:
    """``codec.to_jsonable`` plus ``channel``; float-vector columns are summarised as
    ``{"dim": d, "rows": n}`` unless ``full_vectors``."""
    out = to_jsonable(msg)
    if msg.position is not None:
        out["channel"] = msg.position.channel
    if isinstance(msg, InsertMsg) and not full_vectors:
        columns = out.get("fields")
        if isinstance(columns, dict):
            for column in msg.fields:
                if column.dtype is DataType.FLOAT_VECTOR:
                    columns[column.name] = {"dim": column.dim, "rows": len(column)}
    return out


def pack_to_json(pack: MsgPack, *, full_vectors: bool = False) -> dict[str, Any]:
    return {
        "begin_ts": pack.begin_ts,
        "end_ts": pack.end_ts,
        "msgs": [msg_to_json(m, full_vectors=full_vectors) for m in pack.msgs],
        "start_positions": [p.to_dict() for p in pack.start_positions],
        "end_positions": [p.to_dict() for p in pack.end_positions],
    }


def msg_rows(msg: TsMsg) -> int:
    if isinstance(msg, InsertMsg | DeleteMsg):
        return msg.num_rows
    return 0


IdFormatter = Callable[[bytes], str]


def describe_msg(msg: TsMsg, format_id: IdFormatter) -> str:
    """One short line: type, ids, timestamp, rows, channel@MessageID."""
    where = ""
    if msg.position is not None:
        where = f" {msg.position.channel}@{format_id(msg.position.msg_id)}"
    rows = ""
    if isinstance(msg, InsertMsg):
        rows = f" {msg.collection_name} rows={msg.num_rows}"
    elif isinstance(msg, DeleteMsg):
        rows = f" {msg.collection_name} keys={msg.num_rows}"
    return (
        f"{type(msg).__name__} msg_id={msg.msg_id} source={msg.source_id} "
        f"ts={msg.timestamp}{rows}{where}"
    )


def describe_pack(index: int, pack: MsgPack) -> str:
    kinds = Counter(type(m).__name__ for m in pack.msgs)
    mix = ", ".join(f"{name}x{count}" for name, count in sorted(kinds.items())) or "empty"
    rows = sum(msg_rows(m) for m in pack.msgs)
    return (
        f"pack {index}: ts ({pack.begin_ts}, {pack.end_ts}] msgs={len(pack.msgs)} "
        f"rows={rows} [{mix}]"
    )


def format_message_id(msg_id: MessageID | None) -> str:
    """A readable MessageID: the integer of local backends, else base64 of its bytes."""
    if msg_id is None:
        return "-"
    value = getattr(msg_id, "value", None)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    offset = getattr(msg_id, "offset", None)
    if isinstance(offset, int) and not isinstance(offset, bool):
        return str(offset)
    return base64.b64encode(msg_id.to_bytes()).decode("ascii")


def id_formatter(client: Client) -> IdFormatter:
    """Format a position's ``msg_id`` bytes through ``client`` (base64 if it refuses)."""

    def format_id(raw: bytes) -> str:
        try:
            return format_message_id(client.message_id_from_bytes(raw))
        except MsgStreamError:
            return base64.b64encode(raw).decode("ascii")

    return format_id
