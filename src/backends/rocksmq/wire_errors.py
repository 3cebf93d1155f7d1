"""Errors raised in the owner of a shared store, carried to the process that asked.

An error travels as its class name, its text (the one it was raised with: what ``str``
adds from its attributes, such as a did-you-mean hint, is added again on arrival) and its
plain attributes (strings, numbers, booleans, None, and tuples of strings: ``channel``,
``subject``, ``lost``, the channels a hint is chosen from...). The receiving side rebuilds
an instance of the same class -- of :mod:`msgstream.errors`, or of the store's own
:mod:`.errors` -- with the same text and attributes, so a caller catches
``TopicNotFoundError`` or ``DiskFullError`` whichever process hit it, and reads the same
message.
A name that is no msgstream error comes back as :class:`BackendUnavailableError` with its
text: nothing is ever unpickled or looked up beyond those two modules.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgstream.errors as core_errors
from msgstream.errors import BackendUnavailableError, MsgStreamError

from . import errors as store_errors

_PLAIN = (str, int, float, bool, type(None))


def _named(kind: str) -> type[MsgStreamError] | None:
    """The msgstream error class named ``kind``: the core's, or one of the store's own."""
    for module in (core_errors, store_errors):
        cls = vars(module).get(kind)
        if isinstance(cls, type) and issubclass(cls, MsgStreamError):
            return cls
    return None


def _plain(value: Any) -> bool:
    return isinstance(value, _PLAIN) or (
        isinstance(value, tuple) and all(isinstance(item, str) for item in value)
    )


def error_fields(exc: BaseException) -> list[Any]:
    """The ``[kind, message, attributes]`` of an :attr:`~.frames.Op.ERROR` reply."""
    if not isinstance(exc, MsgStreamError):  # the owner's own: an unclassified error, a bug
        return [BackendUnavailableError.__name__, f"{type(exc).__name__}: {exc}", {}]
    kind = type(exc).__name__
    if _named(kind) is not type(exc):
        kind = _known_base(type(exc))
    text = str(exc.args[0]) if exc.args else Exception.__str__(exc)
    attributes = {k: v for k, v in vars(exc).items() if _plain(v)}
    return [kind, text, attributes]


def _known_base(cls: type[BaseException]) -> str:
    """The nearest class known by name above ``cls`` (another module's own error)."""
    for base in cls.__mro__:
        if _named(base.__name__) is base:
            return str(base.__name__)
    return BackendUnavailableError.__name__


def rebuild_error(kind: str, message: str, attributes: dict[str, Any]) -> MsgStreamError:
    """The error an :attr:`~.frames.Op.ERROR` reply describes."""
    cls = _named(kind) or BackendUnavailableError
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    for name, value in attributes.items():
        if isinstance(value, list):  # a tuple of strings, as JSON carried it
            value = tuple(value)
        if isinstance(name, str) and _plain(value):
            with contextlib.suppress(AttributeError, TypeError):  # e.g. a read-only property
                setattr(exc, name, value)
    return exc
