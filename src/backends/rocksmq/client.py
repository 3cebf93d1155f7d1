"""The ``rocksmq`` backend: an embedded, persistent log on RocksDB (the default).

One store is opened per path and process and shared by every client of that path (RocksDB
allows one writer per directory); the last client to close closes it. A background task
applies retention and compaction while a client is open in a running event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass

import anyio

from msgstream.config import MsgStreamConfig
from msgstream.errors import BackendUnavailableError, StoreLockedError
from msgstream.logs import fields, get_logger
from msgstream.observe import StoreProbe

from ..log_client import LogClient
from .retention import RetentionPolicy
from .settings import RocksmqConfig
from .store import RocksOptions, RocksStore

log = get_logger(__name__)


@dataclass
class _Shared:
    store: RocksStore
    clients: int = 0
    maintenance: asyncio.Task[None] | None = None
    intervals: tuple[float, float] = (60.0, 3600.0)
    probe: StoreProbe | None = None
    """Where each maintenance round reports (None while metrics are off)."""


_OPEN: dict[tuple[str, bool], _Shared] = {}


def options_from_config(
    section: RocksmqConfig, *, read_only: bool = False, create: bool = True
) -> RocksOptions:
    return RocksOptions(
        sync=section.sync,
        page_size=section.page_size_bytes,
        retention=RetentionPolicy(
            max_age_ms=-1
            if section.retention_max_age_s < 0
            else int(section.retention_max_age_s * 1000),
            max_size=section.retention_max_size_bytes,
        ),
        subscription_idle_expiry_ms=(
            -1
            if section.subscription_idle_expiry_s < 0
            else int(section.subscription_idle_expiry_s * 1000)
        ),
        read_only=read_only,
        create=create,
    )


def open_client(
    path: str,
    options: RocksOptions | None = None,
    *,
    max_message_bytes: int = 64 * 1024 * 1024,
    retention_interval_s: float = 60.0,
    compaction_interval_s: float = 3600.0,
) -> LogClient:
    """A client of the store at ``path`` (created if missing unless read-only or
    ``options.create`` is off). A path that cannot hold a store raises a
    :class:`~msgstream.errors.StoreError` naming it."""
    options = options or RocksOptions()
    path = os.path.abspath(path)
    key = (path, options.read_only)
    shared = _OPEN.get(key)
    if shared is None:
        store = RocksStore(path, options)  # errors name the path (failures.store_error)
        shared = _OPEN[key] = _Shared(
            store, intervals=(retention_interval_s, compaction_interval_s)
        )
    elif (shared.store.options, shared.intervals) != (
        options,
        (retention_interval_s, compaction_interval_s),
    ):
        raise BackendUnavailableError(
            f"the rocksmq store at {path!r} is already open in this process with other "
            f"options ({shared.store.options}); open it with the same configuration"
        )
    shared.clients += 1
    _start_maintenance(shared)

    def release() -> None:
        shared.clients -= 1
        if shared.clients == 0:
            if shared.maintenance is not None:
                shared.maintenance.cancel()
            shared.store.close()
            _OPEN.pop(key, None)

    return LogClient(
        shared.store,
        max_message_bytes=max_message_bytes,
        blocking_writes=options.sync,
        on_use=lambda: _start_maintenance(shared),
        on_close=release,
        on_observe=lambda probe: setattr(shared, "probe", probe),
    )


def _start_maintenance(shared: _Shared) -> None:
    """Run retention in the background of the current event loop (once per loop: a store
    can outlive the loop that opened it)."""
    options = shared.store.options
    if shared.store.read_only or (
        not options.retention.enabled and options.subscription_idle_expiry_ms < 0
    ):
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    running = shared.maintenance
    if running is not None and not running.done() and running.get_loop() is loop:
        return
    shared.maintenance = loop.create_task(_maintain(shared), name="msgstream-rocksmq-retention")


def _retention_round(shared: _Shared) -> int:
    """One retention round (in a worker thread), reported to the probe if there is one."""
    store = shared.store
    deleted = store.run_retention()
    probe = shared.probe
    if probe is not None:
        for channel, count in store.last_deleted.items():
            probe.retention_deleted(channel, count)
        probe.size(store.disk_usage())
        for channel, backlogs in store.backlogs().items():
            probe.subscriptions(channel, backlogs)
    return deleted


async def _maintain(shared: _Shared) -> None:
    retention_every, compaction_every = shared.intervals
    since_compaction = 0.0
    deleted_since_compaction = False
    while True:
        await asyncio.sleep(retention_every)
        since_compaction += retention_every
        try:  # in a worker thread: a round (and compaction) must not stall the loop
            deleted = await anyio.to_thread.run_sync(_retention_round, shared)
            deleted_since_compaction |= deleted > 0
            if deleted_since_compaction and since_compaction >= compaction_every:
                await anyio.to_thread.run_sync(shared.store.compact)
                since_compaction = 0.0
                deleted_since_compaction = False
        except Exception:  # keep maintaining; a failed round is retried next interval
            with contextlib.suppress(Exception):
                log.exception(
                    "rocksmq retention round failed at %s",
                    shared.store.path,
                    extra=fields("rocksmq"),
                )


def new_client(
    section: RocksmqConfig,
    shared: MsgStreamConfig,
    *,
    read_only: bool = False,
    create: bool = True,
) -> LogClient:
    """A client of the store at ``rocksmq.path`` (the plug-in's client factory)."""
    return open_client(
        section.resolved_path(),
        options_from_config(section, read_only=read_only, create=create),
        max_message_bytes=shared.max_message_bytes,
        retention_interval_s=section.retention_check_interval_s,
        compaction_interval_s=section.compaction_interval_s,
    )


def new_inspection_client(section: RocksmqConfig, shared: MsgStreamConfig) -> LogClient:
    """A client for looking only (``msgstream inspect``): a store is never created here (a
    mistyped path is an error), and one another process holds open (RocksDB allows one
    writer) is opened read-only instead."""
    try:
        return new_client(section, shared, create=False)
    except StoreLockedError:
        log.info(
            "rocksmq store is in use by another process; opening it read-only",
            extra=fields("rocksmq"),
        )
        return new_client(section, shared, read_only=True)
