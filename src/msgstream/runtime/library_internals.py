"""Private attributes of third-party libraries, read where no public API does the job.

Each library's are read in one module of the package that uses it
(``backends/kafka/aiokafka_private.py``, ``backends/pulsar/pulsar_private.py``,
``bridge_spark/process/pyspark_private.py``), one adapter function per attribute, through
:func:`internal`: a release that moves one fails with a :class:`LibraryInternalError`
naming the library, its version and the attribute, and the tests of those modules read
each attribute from the installed library, so an upgrade that moves one fails there first.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ..errors import BackendUnavailableError

__all__ = ["LibraryInternalError", "internal"]


class LibraryInternalError(BackendUnavailableError):
    """The installed release of a library lacks a private attribute msgstream reads."""

    def __init__(self, distribution: str, owner: str, attribute: str) -> None:
        try:
            release = version(distribution)
        except PackageNotFoundError:
            release = "(version unknown)"
        self.distribution = distribution
        self.attribute = f"{owner}.{attribute}"
        super().__init__(
            f"{distribution} {release} has no {self.attribute}, which msgstream reads (no "
            f"public API does that job): install a release of {distribution} that msgstream "
            "supports"
        )


def internal(obj: object, attribute: str, distribution: str) -> Any:
    """``obj.attribute``, a private attribute of the library ``distribution`` (its
    distribution name: ``aiokafka``, ``pulsar-client``, ``pyspark``)."""
    try:
        return getattr(obj, attribute)
    except AttributeError:
        owner = obj.__name__ if isinstance(obj, type) else type(obj).__name__
        raise LibraryInternalError(distribution, owner, attribute) from None
