"""Errors of the Spark bridge; each is a :class:`msgstream.MsgStreamError` naming what and where."""

from __future__ import annotations

from msgstream.errors import MsgStreamError, ProblemError


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


class CheckpointError(ProblemError, BridgeError):
    """A checkpoint file cannot be read, parsed or written, or belongs to another job."""

    template = "checkpoint {subject}: {problem}"

    @property
    def path(self) -> str:
        return self.subject


class OptionError(ProblemError, BridgeError, ValueError):
    """A bridge option (data source option, batcher argument) is missing or invalid."""

    template = "option {subject!r}: {problem}"

    @property
    def option(self) -> str:
        return self.subject


class SliceIncompleteError(BridgeError):
    """A channel range planned for a micro-batch can no longer be read to its end."""


class BackendCapabilityError(OptionError):
    """The backend the configuration chooses does not offer what the bridge needs of it,
    as its plug-in spec says; ``backend`` and ``capability`` name both."""

    def __init__(self, backend: str, capability: str, why: str = "") -> None:
        suffix = f": {why}" if why else ""
        super().__init__("mq.type", f"backend {backend!r} does not offer {capability}{suffix}")
        self.backend = backend
        self.capability = capability
