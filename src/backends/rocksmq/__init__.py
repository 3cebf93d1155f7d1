"""The ``rocksmq`` backend: an embedded, persistent log on RocksDB (the default).

Importing the package imports no store library (loading the backend's spec and config
section must stay light); its names come from :mod:`.client` on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import new_client, new_inspection_client, open_client, options_from_config
    from .store import RocksOptions, RocksStore

__all__ = [
    "RocksOptions",
    "RocksStore",
    "new_client",
    "new_inspection_client",
    "open_client",
    "options_from_config",
]


def __getattr__(name: str) -> Any:
    module = ".store" if name in ("RocksOptions", "RocksStore") else ".client"
    return getattr(import_module(module, __name__), name)
