"""The pulsar-client internals the Pulsar backend reads, one function each: the native
(``_pulsar``) objects that ``pulsar.asyncio`` wraps (see
:mod:`msgstream.runtime.library_internals`; ``tests/test_library_internals.py`` checks each
against the installed pulsar-client)."""

from __future__ import annotations

from typing import Any

from msgstream.runtime.library_internals import LibraryInternalError, internal

from .library import pulsar_asyncio

__all__ = ["native_client", "native_consumer", "native_producer"]

_PULSAR = "pulsar-client"


def native_client(inner: pulsar_asyncio.Client) -> Any:
    """The ``_pulsar.Client`` under ``inner`` (``_client``): its blocking ``close`` waits
    on a C++ promise where ``pulsar.asyncio``'s hands the library a Python callback."""
    return internal(inner, "_client", _PULSAR)


def native_consumer(inner: pulsar_asyncio.Consumer) -> Any:
    """The ``_pulsar.Consumer`` under ``inner`` (``_consumer``): its ``receive_async``
    takes a callback, which the consumer keeps outstanding instead of a cancellable
    ``receive()`` (see :mod:`.consumer`)."""
    return internal(inner, "_consumer", _PULSAR)


def native_producer(inner: pulsar_asyncio.Producer) -> Any | None:
    """The ``_pulsar.Producer`` under ``inner`` (``_producer``), or None if this release
    hides it: the caller then sends with the public ``send`` (see :mod:`.sending`)."""
    try:
        native = internal(inner, "_producer", _PULSAR)
    except LibraryInternalError:
        return None
    return native if callable(getattr(native, "send_async", None)) else None
