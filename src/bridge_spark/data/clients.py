"""Opening a backend for reading: what the bridge asks of the backend's plug-in spec.

Every backend's spec says how a process that only reads it opens it, keeps a query's
data from retention and cleans up after itself (its reader access,
:mod:`msgstream.streams.reader_access`), and whether its channels exist in one process only; the
bridge asks these of whatever backend the configuration chooses and names none. What
a backend does not offer is a :class:`~bridge_spark.errors.BackendCapabilityError`.
"""

from __future__ import annotations

from msgstream.configuration.config import Config, resolve_backend
from msgstream.configuration.plugins import backend_names, backend_spec
from msgstream.contract.backend import Client
from msgstream.streams.reader_access import ReaderAccess, ReaderClient, reader_access

from ..errors import BackendCapabilityError

READER_ACCESS = "reader access (BackendSpec.reader_access)"
"""The capability every reader of the bridge needs."""
READ_ELSEWHERE = "reading from other processes (BackendSpec.in_process)"
"""The capability the Spark source needs: its executors are other processes."""


def access_of(backend: str) -> ReaderAccess:
    """The reader access of ``backend``; :class:`BackendCapabilityError` if it has none."""
    access = reader_access(backend)
    if access is None:
        raise BackendCapabilityError(
            backend, READER_ACCESS, "the bridge cannot read its channels; choose another"
        )
    return access


def client_access(client: Client) -> ReaderAccess:
    """The reader access of the backend ``client`` reads."""
    return access_of(client.backend_name)


def resolved_config(config: Config) -> Config:
    """The same configuration with the backend (and what its reader access makes
    explicit, e.g. a store path) made explicit, so a process with another environment
    opens the same thing."""
    backend = resolve_backend(config)
    return access_of(backend).resolved(config.replace(mq=config.mq.replace(type=backend)))


def open_reader(config: Config) -> ReaderClient:
    """A client for reading the channels ``config`` points at, opened the way the
    backend's reader access opens one."""
    return access_of(resolve_backend(config)).open(config)


def check_read_elsewhere(config: Config, why: str) -> None:
    """:class:`BackendCapabilityError` (saying ``why`` it is needed, and which backends
    offer it) unless other processes can read the backend ``config`` chooses."""
    backend = resolve_backend(config)
    if backend_spec(backend).in_process:
        able = [
            name
            for name in backend_names()
            if not backend_spec(name).in_process and backend_spec(name).reader_access
        ]
        raise BackendCapabilityError(
            backend,
            READ_ELSEWHERE,
            f"its channels exist only in the process that made them, and {why} "
            f"(use {', '.join(able)})",
        )
