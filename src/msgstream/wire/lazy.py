"""Lazily decoded messages: what a message built by a decode plan defers, and how.

A stream that delivers many messages builds each one from a decode plan
(:mod:`msgstream.wire.plans`): the payload is fully validated when it is read, but the numpy
views over its buffers, the ``hash_keys`` list and the ``position`` are made only when
first used. Such a message holds what it needs for that in one attribute,
``TsMsg.lazy_body`` (a :data:`LazyBody`); its deferred fields are absent from the
instance until then.

Each message class names the fields it may defer with :func:`deferred`, one descriptor
per field. They are non-data descriptors: once a value is in the instance (set by the
constructor, the first read or an assignment) Python finds it there first, at plain
attribute speed, and never calls the descriptor again.

Why descriptors installed by a decorator rather than ``__getattr__``: a class with
``__getattr__`` loses CPython 3.11's specialised attribute reads on every attribute of
every message (building and reading a message cost markedly more:
docs/benchmarks/code-notes.md), and
``@dataclass`` replaces or deletes any descriptor written in the class body as a field's
default, so they are set on the class once the dataclass is made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from .position import MsgPosition


class LazyPlan(Protocol):
    """What a lazily decoded message needs of the decode plan that built it."""

    @property
    def deferred(self) -> frozenset[str]:
        """The body fields the plan leaves to :meth:`build_body`."""

    def build_body(self, payload: bytes) -> dict[str, Any]:
        """The values of the deferred body fields, made from ``payload``."""

    @property
    def shared(self) -> Mapping[str, Any]:
        """Body fields whose value every message of the plan shares (a DML plan's
        collection and partition): a message takes its own on first read, not when it is
        built."""


LazyBody = tuple[LazyPlan, bytes, Any, tuple[str, str]]
"""``(plan, payload, id_bytes, (channel, subscription))``: what a message built by a
decode plan keeps to build its deferred fields and its position, for its whole life (its
arrays are views of that payload anyway). A plain tuple, not a named one: one is made
per message on the hot path, and a tuple subclass costs many times more to make
(docs/benchmarks/code-notes.md)."""

_NO_DEFAULT: Any = object()
_new_tuple = tuple.__new__
"""``_new_tuple(MsgPosition, fields)``: a position without its Python-level ``__new__``."""
_C = TypeVar("_C", bound=type)


class _Deferred:
    """A field a lazily decoded message makes on first read (subclasses say how)."""

    __slots__ = ("default", "name")

    def __init__(self, default: Any = _NO_DEFAULT) -> None:
        self.default = default
        """What the class attribute of a dataclass field with a plain default would be."""
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def _absent(self, owner: type | None) -> Any:
        """The field's plain default, or the error of an attribute that is not there."""
        if self.default is _NO_DEFAULT:
            raise AttributeError(f"{getattr(owner, '__name__', owner)!r} has no {self.name!r}")
        return self.default


class DeferredBody(_Deferred):
    """A body field (a numpy view over the payload, say) built by the message's plan: the
    first read of any of them builds them all (``msg.adopt_body``). A field the plan
    shares among its messages (:attr:`LazyPlan.shared`) is taken from there alone."""

    __slots__ = ()

    def __get__(self, msg: Any, owner: type | None = None) -> Any:
        if msg is None:
            return self._absent(owner)
        lazy: LazyBody | None = msg.lazy_body
        if lazy is not None:
            plan, name = lazy[0], self.name
            if name in plan.deferred:
                payload = lazy[1]
                msg.adopt_body(plan.build_body(payload), payload)
                return msg.__dict__[name]
            shared = plan.shared
            if name in shared:
                value = msg.__dict__[name] = shared[name]
                return value
        return self._absent(type(msg))


class DeferredSize(_Deferred):
    """``size``: the length of the payload the lazy body holds (the field's default for a
    message without one)."""

    __slots__ = ()

    def __get__(self, msg: Any, owner: type | None = None) -> Any:
        if msg is None:
            return self._absent(owner)
        lazy: LazyBody | None = msg.lazy_body
        if lazy is None:
            return self._absent(type(msg))
        size = msg.__dict__[self.name] = len(lazy[1])
        return size


class DeferredPosition(_Deferred):
    """``position``, made from the MessageID bytes and (channel, subscription) that the
    lazy body holds; None for a message without one."""

    __slots__ = ()

    def __get__(self, msg: Any, owner: type | None = None) -> MsgPosition | None:
        if msg is None:
            return None
        lazy: LazyBody | None = msg.lazy_body
        if lazy is None:
            return None
        _, _, id_bytes, (channel, group) = lazy
        position: MsgPosition = _new_tuple(
            MsgPosition, (channel, id_bytes, group, msg.timestamp, 0)
        )
        msg.__dict__[self.name] = position
        return position


class DeferredEmptyList(_Deferred):
    """A list field payloads do not carry (``hash_keys``): a new empty list."""

    __slots__ = ()

    def __get__(self, msg: Any, owner: type | None = None) -> list[Any]:
        if msg is None:
            default: list[Any] = self._absent(owner)
            return default
        value: list[Any] = []
        msg.__dict__[self.name] = value
        return value


def deferred(**fields: _Deferred) -> Callable[[_C], _C]:
    """Class decorator, over ``@dataclass``: the named fields may be absent from a lazily
    decoded message and are made by their descriptor when first read."""

    def install(cls: _C) -> _C:
        for name, descriptor in fields.items():
            setattr(cls, name, descriptor)
            descriptor.__set_name__(cls, name)
        return cls

    return install
