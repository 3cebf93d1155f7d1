"""The ``rocksmq`` backend: an embedded, persistent log on RocksDB (the default).

Importing the package imports no store library (loading the backend's spec and config
section must stay light); its names come from :mod:`.client` on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgstream.runtime.exports import lazy_exports

if TYPE_CHECKING:
    from .client import new_client as new_client
    from .client import new_inspection_client as new_inspection_client
    from .client import open_client as open_client
    from .client import options_from_config as options_from_config
    from .store import RocksOptions as RocksOptions
    from .store import RocksStore as RocksStore
else:
    __all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
