"""Backends are plug-ins: each one is described by a :class:`BackendSpec`.

The core names no backend. A backend package exports one spec and declares it under the
``msgstream.backends`` entry-point group of its distribution::

    [project.entry-points."msgstream.backends"]
    mybroker = "mybroker_msgstream.plugin:SPEC"

so installing the package is all it takes. :func:`register_backend` adds one in-process
(tests, embedded plug-ins). Loading a spec imports the backend's config section only: the
client, and with it the broker library, is imported when a client is made.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from types import MappingProxyType

from ..errors import BackendUnavailableError, MsgStreamError, find_backend_errors_with
from .sections import Section

__all__ = [
    "DEFAULT_READER_ACCESS",
    "ENTRY_POINT_GROUP",
    "BackendSpec",
    "backend_error",
    "backend_names",
    "backend_spec",
    "backend_specs",
    "fallback_backend",
    "register_backend",
    "selecting_backends",
    "tag_owner",
    "unregister_backend",
]

ENTRY_POINT_GROUP = "msgstream.backends"

DEFAULT_READER_ACCESS = "msgstream.streams.reader_access:SUBSCRIPTIONS"
"""A spec's :attr:`~BackendSpec.reader_access` unless it names its own."""


@dataclass(frozen=True)
class BackendSpec:
    """What msgstream needs to know about a backend, without importing it.

    ``client_factory`` is ``"module:callable"`` (a function or a client class): it is
    called with the backend's own section and the shared ``msgstream`` section and returns
    a :class:`~msgstream.contract.backend.Client`.
    """

    name: str
    """The ``mq.type`` value choosing the backend; also the name of its config section."""
    section: type[Section]
    """Its config section (``section.SECTION == name``), with defaults and validation."""
    client_factory: str
    inspection_client_factory: str | None = None
    """Like ``client_factory``, for a client that only looks (``msgstream inspect``) when
    the backend opens one its own way; None: the ordinary client."""
    message_id_tag: bytes | None = None
    """First byte of its serialised MessageIDs when they are that byte plus an int64 (9
    bytes), so another backend can name the owner of a misplaced id; None otherwise."""
    extra: str | None = None
    """The msgstream extra that installs its broker library: ``msgstream[<extra>]``."""
    selected_by: str | None = None
    """A key of its section that, when set, makes ``mq.type: default`` choose it."""
    selection_rank: int = 0
    """Its place among the backends with ``selected_by`` (lowest first)."""
    fallback: bool = False
    """Chosen by ``mq.type: default`` when no backend's ``selected_by`` key is set."""
    required_keys: tuple[str, ...] = ()
    """Keys of its section that must be set when it is chosen (e.g. a broker address)."""
    listing_position: int = 100
    """Where it is listed among ``mq.type``'s choices, the sections and the configuration
    reference: lowest first, then by name (entry points come in no reliable order)."""
    reader_access: str | None = DEFAULT_READER_ACCESS
    """``"module:attribute"`` naming its :class:`~msgstream.streams.reader_access.ReaderAccess`:
    how processes that only read it (the Spark bridge's) open it, keep a query's data
    from retention and clean up; imported when first needed. The default needs nothing
    beyond the client protocols; None: it cannot be read that way."""
    in_process: bool = False
    """Its channels exist only in the process that made them: no other process reads
    them (the Spark source's executors cannot)."""
    directory_key: str | None = None
    """A key of its section naming the local directory it keeps its channels in, for a
    backend that keeps them there; what a tool making a throwaway store sets."""
    errors: str | None = None
    """The module of its own public errors (the names in its ``__all__``), each then
    importable from :mod:`msgstream.errors` and :mod:`msgstream` too; None: it raises the
    core's errors only."""

    def __post_init__(self) -> None:
        if self.name != self.section.SECTION:
            raise ValueError(f"backend {self.name!r}: its section's SECTION must be the name")
        if self.name == "default":
            raise ValueError("'default' is mq.type's own value, not a backend name")
        if self.message_id_tag is not None and len(self.message_id_tag) != 1:
            raise ValueError(f"backend {self.name!r}: message_id_tag must be one byte")
        for key in (self.selected_by, self.directory_key, *self.required_keys):
            if key is not None and key not in self.section.model_fields:
                raise ValueError(f"backend {self.name!r}: {key!r} is no key of its section")
        for factory in (self.client_factory, self.inspection_client_factory, self.reader_access):
            module, _, function = (factory or "m:f").partition(":")
            if not module or not function:
                raise ValueError(f"backend {self.name!r}: {factory!r} is not 'module:function'")


_lock = threading.Lock()
_specs: dict[str, BackendSpec] | None = None
_tags: dict[bytes, str] = {}
_loading = threading.local()
"""``active`` while this thread loads the entry points (see :func:`backend_error`)."""


def _loaded() -> dict[str, BackendSpec]:
    global _specs
    if _specs is None:
        with _lock:
            if _specs is None:
                _loading.active = True
                try:
                    _specs = _listed(_from_entry_points())
                finally:
                    _loading.active = False
                _retag(_specs)
    return _specs


def _from_entry_points() -> dict[str, BackendSpec]:
    found: dict[str, BackendSpec] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in found:  # the same distribution seen twice on sys.path
            continue
        spec = point.load()
        if not isinstance(spec, BackendSpec) or spec.name != point.name:
            raise BackendUnavailableError(
                f"entry point {point.name!r} = {point.value!r} of group "
                f"{ENTRY_POINT_GROUP!r} is not a BackendSpec named {point.name!r}"
            )
        _check_tag(spec, found)
        found[spec.name] = spec
    return found


def _check_tag(spec: BackendSpec, specs: Mapping[str, BackendSpec]) -> None:
    for other in specs.values():
        if spec.message_id_tag is not None and other.message_id_tag == spec.message_id_tag:
            raise ValueError(
                f"backends {other.name!r} and {spec.name!r} share the MessageID tag "
                f"{spec.message_id_tag!r}"
            )


def _listed(specs: Mapping[str, BackendSpec]) -> dict[str, BackendSpec]:
    ordered = sorted(specs.values(), key=lambda s: (s.listing_position, s.name))
    return {spec.name: spec for spec in ordered}


def _relist(specs: dict[str, BackendSpec]) -> None:
    """Re-order ``specs`` in place by listing position, and rebuild the tag table."""
    listed = _listed(specs)
    specs.clear()
    specs.update(listed)
    _retag(specs)


def _retag(specs: Mapping[str, BackendSpec]) -> None:
    global _tags
    _tags = {s.message_id_tag: s.name for s in specs.values() if s.message_id_tag is not None}


def backend_specs() -> Mapping[str, BackendSpec]:
    """Every registered backend by name, in listing order."""
    return MappingProxyType(_loaded())


def backend_names() -> tuple[str, ...]:
    return tuple(_loaded())


def backend_spec(name: str) -> BackendSpec:
    """The spec of backend ``name``; ``KeyError`` when none is registered."""
    return _loaded()[name]


def selecting_backends() -> list[BackendSpec]:
    """The backends ``mq.type: default`` may pick by a key of theirs, in rank order."""
    ranked = [s for s in _loaded().values() if s.selected_by is not None]
    return sorted(ranked, key=lambda s: s.selection_rank)


def fallback_backend() -> BackendSpec | None:
    """The backend ``mq.type: default`` picks when no selecting key is set."""
    return next((s for s in _loaded().values() if s.fallback), None)


def tag_owner(tag: bytes) -> str | None:
    """The backend whose MessageIDs start with the byte ``tag``, if any."""
    _loaded()
    return _tags.get(tag)


def backend_error(name: str) -> type[MsgStreamError] | None:
    """The public error ``name`` of a registered backend (see :attr:`BackendSpec.errors`),
    if one has it. None while this thread loads the backends' specs: a spec module that
    imports a backend's error imports it from that backend's own module."""
    if getattr(_loading, "active", False):
        return None
    for spec in _loaded().values():
        if spec.errors is None:
            continue
        module = import_module(spec.errors)
        error = getattr(module, name, None) if name in getattr(module, "__all__", ()) else None
        if isinstance(error, type) and issubclass(error, MsgStreamError):
            return error
    return None


def register_backend(spec: BackendSpec) -> None:
    """Add a backend in-process, as if an installed package declared it."""
    specs = _loaded()
    with _lock:
        if spec.name in specs:
            raise ValueError(f"a backend named {spec.name!r} is already registered")
        _check_tag(spec, specs)
        specs[spec.name] = spec
        _relist(specs)


def unregister_backend(name: str) -> None:
    """Remove a backend added with :func:`register_backend` (or found as an entry point)."""
    specs = _loaded()
    with _lock:
        specs.pop(name, None)
        _retag(specs)


find_backend_errors_with(backend_error)
