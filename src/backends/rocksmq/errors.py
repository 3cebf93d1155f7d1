"""The embedded store's errors: a store at a path that cannot be used as asked.

They are rocksmq's own, so they live here, not in :mod:`msgstream.errors`; the backend's
spec names this module (:attr:`~msgstream.configuration.plugins.BackendSpec.errors`), so each one is
also importable from :mod:`msgstream.errors` and :mod:`msgstream`, as in 0.1.
"""

from __future__ import annotations

from msgstream.errors import BackendUnavailableError, ProblemError, SubjectName

__all__ = [
    "DiskFullError",
    "StoreCorruptedError",
    "StoreError",
    "StoreLockedError",
    "StorePathError",
]


class StoreError(ProblemError, BackendUnavailableError):
    """The embedded store at ``path`` cannot be used as asked. Subclasses say why."""

    template = "rocksmq store at {subject!r}: {problem}"
    path = SubjectName()


class StorePathError(StoreError):
    """The store's path is unusable: a file, under a file, not permitted, or missing."""


class StoreLockedError(StoreError):
    """Another process holds the store for itself (rocksmq with ``sharing: exclusive``)."""


class StoreCorruptedError(StoreError):
    """A file of the store is damaged; ``lost`` says what could not be read, when known.

    Raised at open (a damaged write-ahead log or manifest) or at read (a damaged table
    block): acknowledged data is never dropped without this error. ``msgstream doctor``
    checks a store and, when asked, recovers what can be recovered.
    """

    def __init__(self, path: str, problem: str, lost: str = "") -> None:
        super().__init__(path, problem + (f"; lost: {lost}" if lost else ""))
        self.lost = lost


class DiskFullError(StoreError):
    """A write failed because the disk holding the store is full. Nothing of that write
    was stored; the store resumes by itself once space is freed."""
