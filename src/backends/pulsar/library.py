"""The pulsar-client modules, imported in one place.

pulsar-client ships neither type hints nor a ``py.typed`` marker, so mypy sees its modules
as untyped; the rest of this package takes them from here.
"""

from __future__ import annotations

import _pulsar
import pulsar
import pulsar.asyncio as pulsar_asyncio

__all__ = ["_pulsar", "pulsar", "pulsar_asyncio"]
