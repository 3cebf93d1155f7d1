"""Spark bridge: time-tick-aligned micro-batches of msgstream channels into Spark DataFrames.

Two entry points:

- :class:`MicroBatcher` (driver side): reads a TtMsgStream, cuts batches at pack
  boundaries, hands ``(df, batch_id)`` to a function and checkpoints atomically; with
  :class:`ParquetSink` the output holds every row exactly once across restarts.
- ``spark.readStream.format("msgstream")`` (:class:`MsgStreamDataSource`, registered by
  :func:`register` or :func:`local_spark`): a Spark streaming source whose offsets are
  per-channel positions at one common time tick.

Rows become frames of a collection schema (:class:`FrameSchema`): ``inserts``,
``deletes`` or ``changes``, with ``_ts``, ``_channel``, ``_msg_id`` (and more) columns.

The names are imported on first use (PEP 562), so importing the package -- as the CLI
does to find the bridge's commands -- loads neither PySpark nor pyarrow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .batcher import BatcherProgress, BatchInfo, MicroBatcher, Until, UserFunction
    from .checkpoint import BatchMark, CheckpointState, load_checkpoint, save_checkpoint
    from .convert import FrameBuilder, table_from_packs
    from .errors import (
        BridgeError,
        CheckpointError,
        OptionError,
        SchemaMismatchError,
        SchemaNotFoundError,
        SliceIncompleteError,
    )
    from .frames import FrameKind, FrameSchema
    from .launcher import worker_python
    from .offsets import SliceOffset
    from .options import bridge_config
    from .session import local_spark
    from .sink import ParquetSink
    from .source import MsgStreamDataSource, register
    from .subscription import drop_subscription

_MODULE_OF = {
    "BatchInfo": "batcher",
    "BatchMark": "checkpoint",
    "BatcherProgress": "batcher",
    "BridgeError": "errors",
    "CheckpointError": "errors",
    "CheckpointState": "checkpoint",
    "FrameBuilder": "convert",
    "FrameKind": "frames",
    "FrameSchema": "frames",
    "MicroBatcher": "batcher",
    "MsgStreamDataSource": "source",
    "OptionError": "errors",
    "ParquetSink": "sink",
    "SchemaMismatchError": "errors",
    "SchemaNotFoundError": "errors",
    "SliceIncompleteError": "errors",
    "SliceOffset": "offsets",
    "Until": "batcher",
    "UserFunction": "batcher",
    "bridge_config": "options",
    "drop_subscription": "subscription",
    "load_checkpoint": "checkpoint",
    "local_spark": "session",
    "register": "source",
    "save_checkpoint": "checkpoint",
    "table_from_packs": "convert",
    "worker_python": "launcher",
}

__all__ = [
    "BatchInfo",
    "BatchMark",
    "BatcherProgress",
    "BridgeError",
    "CheckpointError",
    "CheckpointState",
    "FrameBuilder",
    "FrameKind",
    "FrameSchema",
    "MicroBatcher",
    "MsgStreamDataSource",
    "OptionError",
    "ParquetSink",
    "SchemaMismatchError",
    "SchemaNotFoundError",
    "SliceIncompleteError",
    "SliceOffset",
    "Until",
    "UserFunction",
    "bridge_config",
    "drop_subscription",
    "load_checkpoint",
    "local_spark",
    "register",
    "save_checkpoint",
    "table_from_packs",
    "worker_python",
]


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups do not come here
    return value
