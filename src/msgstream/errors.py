"""Every public error of msgstream derives from :class:`MsgStreamError`.

Messages always say *what* went wrong and *where*: the channel, the configuration key,
the MessageID or the subscription involved.
"""

from __future__ import annotations

import difflib
import functools
import warnings
from collections.abc import Callable, Iterable
from typing import ClassVar, overload


class MsgStreamError(Exception):
    """Base class of every error msgstream raises on purpose."""


class ProblemError(MsgStreamError):
    """An error about one named thing (a configuration key, a store, a checkpoint file, an
    option): ``subject`` names it, ``problem`` says what is wrong with it, and the message
    is the class's ``template`` filled with both."""

    template: ClassVar[str] = "{subject!r}: {problem}"

    def __init__(self, subject: str, problem: str) -> None:
        super().__init__(self.template.format(subject=subject, problem=problem))
        self.subject = subject
        self.problem = problem


class SubjectName:
    """``path = SubjectName()`` in a :class:`ProblemError` subclass: its ``subject`` under
    the name that says what the subject is (a key, a path, an option)."""

    @overload
    def __get__(self, instance: None, owner: type[ProblemError]) -> SubjectName: ...

    @overload
    def __get__(self, instance: ProblemError, owner: type[ProblemError]) -> str: ...

    def __get__(
        self, instance: ProblemError | None, owner: type[ProblemError]
    ) -> str | SubjectName:
        return self if instance is None else instance.subject


class ConfigError(ProblemError, ValueError):
    """A configuration value is missing, unknown or invalid. ``key`` names it."""

    template = "config key {subject!r}: {problem}"
    key = SubjectName()


class CodecError(MsgStreamError):
    """A payload could not be encoded or decoded."""


class DecodeError(CodecError):
    """Bytes read from a channel are truncated, oversized or corrupt."""


class UnknownMessageTypeError(CodecError):
    """A message type code (or class) is not registered."""

    def __init__(self, type_code: int | str, where: str = "") -> None:
        suffix = f" ({where})" if where else ""
        super().__init__(f"unknown message type {type_code!r}{suffix}")
        self.type_code = type_code


class UnknownTypeCodeError(DecodeError, UnknownMessageTypeError):
    """Bytes read from a channel carry a message type code nobody registered.

    Both a :class:`DecodeError` (whatever comes from bytes fails with one) and an
    :class:`UnknownMessageTypeError` (readers count these apart: the payload is sound,
    but this process lacks the type, e.g. a newer producer's).
    """


class TopicNotFoundError(MsgStreamError):
    """A channel (topic) does not exist on the broker.

    Most often the name is a typo, so the error names the closest existing channels
    (:attr:`suggestions`, e.g. ``did you mean 'orders-1'?``) among ``known``: the channels
    the raiser could list where it found the one missing. They are worked out when first
    asked for (the message is built), not when raised: a caller waiting for a channel
    to appear raises this on every look and rarely reads it.
    """

    MAX_SUGGESTIONS: ClassVar[int] = 3
    _known: tuple[str, ...] = ()  # also what one rebuilt from its text and fields has

    def __init__(self, channel: str, backend: str = "", known: Iterable[str] = ()) -> None:
        where = f" on backend {backend!r}" if backend else ""
        super().__init__(f"channel {channel!r} does not exist{where}")
        self.channel = channel
        self._known = tuple(known)

    @functools.cached_property
    def suggestions(self) -> tuple[str, ...]:
        """The existing channels closest to :attr:`channel`, best first (none when no name
        is close, or the raiser could not list the channels)."""
        others = [name for name in self._known if name != self.channel]
        return tuple(difflib.get_close_matches(self.channel, others, n=self.MAX_SUGGESTIONS))

    @property
    def hint(self) -> str:
        """``did you mean 'a' or 'b'?`` for the :attr:`suggestions`; empty without any."""
        names = [repr(name) for name in self.suggestions]
        if not names:
            return ""
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        return f"did you mean {listed}?"

    def __str__(self) -> str:
        hint = self.hint
        return f"{super().__str__()}; {hint}" if hint else super().__str__()


class ReadIncompleteError(MsgStreamError):
    """Messages a channel holds, up to a MessageID known to exist, did not arrive within
    the time allowed (deleted by retention meanwhile, or a broker that stalls)."""


class InvalidChannelNameError(MsgStreamError, ValueError):
    """A channel name is empty, too long or holds characters a broker refuses."""


class InvalidPositionError(MsgStreamError, ValueError):
    """A position or MessageID cannot be used where it was given."""


class ForeignMessageIdError(InvalidPositionError):
    """A MessageID made by one backend was handed to another."""

    def __init__(self, expected_backend: str, got: str) -> None:
        super().__init__(
            f"MessageID belongs to backend {got!r}, not to {expected_backend!r}; "
            "positions cannot move between brokers"
        )
        self.expected_backend = expected_backend
        self.got = got


class StreamClosedError(MsgStreamError, RuntimeError):
    """An operation was attempted on a closed stream, client, producer or consumer."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} is closed")


class StreamStateError(MsgStreamError, RuntimeError):
    """An operation was called out of order (e.g. produce before as_producer)."""


class BackendUnavailableError(MsgStreamError):
    """A backend is not installed, not implemented, or its broker cannot be reached."""


class SendOutcomeUnknownError(BackendUnavailableError):
    """A send got no acknowledgement before its deadline and could not be settled by a
    retry: its messages may or may not have been stored. Nothing is retried silently
    after this (a retry with a new send could store them twice); the caller decides."""


class MessageTooLargeError(MsgStreamError, ValueError):
    """A message exceeds the size a channel accepts."""

    def __init__(self, channel: str, size: int, limit: int) -> None:
        super().__init__(
            f"message of {size} bytes exceeds the limit of {limit} bytes on channel {channel!r}"
        )
        self.channel = channel
        self.size = size
        self.limit = limit


class MissingTimestampError(MsgStreamError, ValueError):
    """A DML message was built without a timestamp (or with 0): it would sort before every
    time tick and be dropped as late, so it is refused where it is made."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"{where}: no timestamp; give timestamp= (a hybrid timestamp from "
            "TimeTickEmitter.begin()/reserve() or TsoAllocator.allocate()) or row_timestamps="
        )
        self.where = where


class LateMessageError(MsgStreamError):
    """A data message arrived with a timestamp at or below its channel's last time tick."""

    def __init__(self, channel: str, msg_id: int, timestamp: int, last_tick: int) -> None:
        super().__init__(
            f"late message on channel {channel!r}: msg_id={msg_id} timestamp={timestamp} "
            f"<= last time tick {last_tick}"
        )
        self.channel = channel
        self.msg_id = msg_id
        self.timestamp = timestamp
        self.last_tick = last_tick


class AuthenticationError(BackendUnavailableError):
    """The broker refused the client's credentials (SASL user/password, token, certificate).

    A subclass of :class:`BackendUnavailableError`: the broker cannot be used, and retrying
    with the same credentials will not help.
    """


class AuthorizationError(BackendUnavailableError):
    """The broker knows the client but refuses it this operation on this channel (an ACL or
    a namespace permission). ``channel`` and ``operation`` ("write", "read", ...) name it."""

    def __init__(self, channel: str, operation: str, detail: str = "") -> None:
        suffix = f": {detail}" if detail else ""
        super().__init__(f"not authorized to {operation} channel {channel!r}{suffix}")
        self.channel = channel
        self.operation = operation


_RENAMED = {"TopicNotFound": "TopicNotFoundError", "InvalidChannelName": "InvalidChannelNameError"}
"""Names of 0.1 that did not end in ``Error``; still importable, with a warning."""


def __getattr__(name: str) -> type[MsgStreamError]:
    """A backend's own error (:attr:`~msgstream.configuration.plugins.BackendSpec.errors`), or a
    name of 0.1 (with a warning)."""
    new = _RENAMED.get(name)
    if new is not None:
        warnings.warn(
            f"msgstream.{name} is renamed {new}; the old name will be removed in 0.3",
            DeprecationWarning,
            stacklevel=2,
        )
        renamed: type[MsgStreamError] = globals()[new]
        return renamed
    error = None if _backend_error is None or name.startswith("__") else _backend_error(name)
    if error is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return error


BackendErrorLookup = Callable[[str], "type[MsgStreamError] | None"]
_backend_error: BackendErrorLookup | None = None


def find_backend_errors_with(lookup: BackendErrorLookup) -> None:
    """How :func:`__getattr__` finds a backend's own error by name: the plug-ins, which
    need this module first, install :func:`msgstream.configuration.plugins.backend_error` here."""
    global _backend_error
    _backend_error = lookup
