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

from msgstream.exports import lazy_exports

if TYPE_CHECKING:
    from .batcher import BatcherProgress as BatcherProgress
    from .batcher import BatchInfo as BatchInfo
    from .batcher import MicroBatcher as MicroBatcher
    from .batcher import Until as Until
    from .batcher import UserFunction as UserFunction
    from .checkpoint import BatchMark as BatchMark
    from .checkpoint import CheckpointState as CheckpointState
    from .checkpoint import load_checkpoint as load_checkpoint
    from .checkpoint import save_checkpoint as save_checkpoint
    from .convert import FrameBuilder as FrameBuilder
    from .convert import table_from_packs as table_from_packs
    from .errors import BridgeError as BridgeError
    from .errors import CheckpointError as CheckpointError
    from .errors import OptionError as OptionError
    from .errors import SchemaMismatchError as SchemaMismatchError
    from .errors import SchemaNotFoundError as SchemaNotFoundError
    from .errors import SliceIncompleteError as SliceIncompleteError
    from .frames import FrameKind as FrameKind
    from .frames import FrameSchema as FrameSchema
    from .launcher import worker_python as worker_python
    from .offsets import SliceOffset as SliceOffset
    from .options import bridge_config as bridge_config
    from .session import local_spark as local_spark
    from .sink import ParquetSink as ParquetSink
    from .source import MsgStreamDataSource as MsgStreamDataSource
    from .source import register as register
    from .subscription import drop_subscription as drop_subscription
else:
    __all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
