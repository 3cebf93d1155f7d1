"""Errors of the Spark bridge; each is a :class:`msgstream.MsgStreamError` naming what and where."""

from __future__ import annotations

from msgstream.errors import MsgStreamError


class BridgeError(MsgStreamError):
    """Base class of the Spark bridge's own errors."""


class SchemaMismatchError(BridgeError, TypeError):
    """A message's columns do not fit the collection schema the frame was built from."""

    def __init__(self, field: str, problem: str, *, channel: str = "", where: str = "") -> None:
        place = f" on channel {channel!r}" if channel else ""
        at = f" in {where}" if where else ""
        super().__init__(f"field {field!r}{at}{place}: {problem}")
        self.field = field
        self.channel = channel
        self.problem = problem


class SchemaNotFoundError(BridgeError):
    """No collection schema was given and none could be found in the channels."""


class CheckpointError(BridgeError):
    """A checkpoint file cannot be read, parsed or written, or belongs to another job."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"checkpoint {path}: {problem}")
        self.path = path
        self.problem = problem


class OptionError(BridgeError, ValueError):
    """A bridge option (data source option, batcher argument) is missing or invalid."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"option {option!r}: {problem}")
        self.option = option
        self.problem = problem


class SliceIncompleteError(BridgeError):
    """A channel range planned for a micro-batch can no longer be read to its end."""
