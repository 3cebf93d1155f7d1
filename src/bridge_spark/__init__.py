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

from typing import TYPE_CHECKING

from msgstream.runtime.exports import lazy_exports

if TYPE_CHECKING:
    from .data.batcher import BatcherProgress as BatcherProgress
    from .data.batcher import BatchInfo as BatchInfo
    from .data.batcher import MicroBatcher as MicroBatcher
    from .data.batcher import Until as Until
    from .data.batcher import UserFunction as UserFunction
    from .data.checkpoint import BatchMark as BatchMark
    from .data.checkpoint import CheckpointState as CheckpointState
    from .data.checkpoint import load_checkpoint as load_checkpoint
    from .data.checkpoint import save_checkpoint as save_checkpoint
    from .data.convert import FrameBuilder as FrameBuilder
    from .data.convert import table_from_packs as table_from_packs
    from .data.frames import FrameKind as FrameKind
    from .data.frames import FrameSchema as FrameSchema
    from .data.offsets import SliceOffset as SliceOffset
    from .data.options import bridge_config as bridge_config
    from .data.sink import ParquetSink as ParquetSink
    from .data.source import MsgStreamDataSource as MsgStreamDataSource
    from .data.source import register as register
    from .data.subscription import drop_subscription as drop_subscription
    from .errors import BridgeError as BridgeError
    from .errors import CheckpointError as CheckpointError
    from .errors import OptionError as OptionError
    from .errors import SchemaMismatchError as SchemaMismatchError
    from .errors import SchemaNotFoundError as SchemaNotFoundError
    from .errors import SliceIncompleteError as SliceIncompleteError
    from .process.launcher import worker_python as worker_python
    from .session import local_spark as local_spark
else:
    __all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
