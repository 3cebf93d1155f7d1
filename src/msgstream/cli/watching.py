"""Refreshing a rich table in place until interrupted (``msgstream inspect --watch``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from rich.live import Live
from rich.table import Table

from .common import stdout_console


async def watch_live(make: Callable[[], Awaitable[Table]], every_s: float) -> None:
    """Show ``await make()`` and replace it every ``every_s`` seconds, for ever (cancel or
    interrupt to stop; the last table stays on the screen)."""
    with Live(await make(), console=stdout_console(), auto_refresh=False) as live:
        while True:
            await asyncio.sleep(every_s)
            live.update(await make(), refresh=True)
