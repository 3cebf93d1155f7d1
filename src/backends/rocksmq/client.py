"""The ``rocksmq`` backend: an embedded, persistent log on RocksDB (the default).

One store is opened per path and process and shared by every client of that path (RocksDB
allows one writer per directory); the last client to close closes it. A background task
applies retention and compaction while a client is open in a running event loop.

Several processes share a store (``rocksmq.sharing: auto``, the default): the first to
open it *owns* it (:mod:`.ownership`: a lock in the store's directory), opens RocksDB and
serves the other processes from a thread (:mod:`.server`); each later process *attaches*
to it (:mod:`.link`) and gets a :class:`~.remote.RemoteClient`, whose calls run in the
owner. When the owner goes away, an attached process that has something to do takes the
lock, opens the store and serves it, and the others reconnect to it. A process gives up
ownership when its last client closes. ``exclusive`` keeps the store to one process;
``read_only`` follows it through a RocksDB secondary instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from dataclasses import dataclass, field

import anyio

from msgstream.configuration import config
from msgstream.configuration.config import MsgStreamConfig
from msgstream.errors import BackendUnavailableError
from msgstream.observability.logs import fields, get_logger
from msgstream.observability.observe import StoreProbe

from ..log_client import LogClient
from .errors import StoreLockedError
from .failures import check_store_path, store_error
from .frames import FRAME_SLACK, MIN_FRAME_LIMIT
from .link import Link
from .ownership import OwnerLock, read_owner, remove_socket
from .remote import RemoteClient
from .retention import RetentionPolicy
from .server import OwnerServer
from .settings import RocksmqConfig, Sharing
from .store import RocksOptions, RocksStore

log = get_logger(__name__)


@dataclass
class _Shared:
    """This process's use of the store at ``path``: the store itself while it owns (or,
    read-only, follows) it, else the link to its owner."""

    path: str
    options: RocksOptions
    sharing: Sharing
    intervals: tuple[float, float] = (60.0, 3600.0)
    timeout_s: float = config.STREAM_DEFAULTS.operation_timeout_s
    frame_limit: int = MIN_FRAME_LIMIT + FRAME_SLACK
    store: RocksStore | None = None
    lock: OwnerLock | None = None
    server: OwnerServer | None = None
    link: Link | None = None
    clients: int = 0
    maintenance: asyncio.Task[None] | None = None
    probe: StoreProbe | None = None
    """Where each maintenance round reports (None while metrics are off)."""
    mutex: threading.Lock = field(default_factory=threading.Lock)
    taking_over: bool = False
    closed: bool = False

    @property
    def settings(self) -> tuple[RocksOptions, Sharing, tuple[float, float]]:
        return self.options, self.sharing, self.intervals

    def open(self) -> None:
        """Own the store (exclusive, or auto when nobody owns it), follow it (read_only),
        or leave it to its owner (auto; attached)."""
        if self.sharing == "read_only":
            self.store = RocksStore(self.path, self.options)
            return
        check_store_path(self.path, create=self.options.create)
        lock = _try_lock(self.path, self.sharing)
        if lock is None:
            owner = read_owner(self.path)
            if self.sharing == "exclusive" or (owner is not None and owner.sharing == "exclusive"):
                raise _locked_error(self.path, self.sharing, owner.pid if owner else None)
            return  # attached: the link connects on first use
        try:
            self.store = RocksStore(self.path, self.options)
            if self.sharing == "auto":
                self.server = OwnerServer(self.store, self.frame_limit)
                self.server.start()
        except BaseException:
            if self.store is not None:
                self.store.close()
                self.store = None
            lock.release()
            raise
        self.lock = lock

    async def take_over(self) -> None:
        """Become the owner if nobody is (called by an attached connection that lost its
        owner): the store is opened in a worker thread, then served."""
        with self.mutex:
            if self.store is not None or self.closed or self.taking_over:
                return
            self.taking_over = True
        try:
            lock = _try_lock(self.path, self.sharing)
            if lock is None:
                owner = read_owner(self.path)
                if owner is not None and owner.sharing == "exclusive":
                    raise _locked_error(self.path, self.sharing, owner.pid)
                return
            store: RocksStore | None = None
            try:
                store = await anyio.to_thread.run_sync(RocksStore, self.path, self.options)
                server = OwnerServer(store, self.frame_limit)
                await anyio.to_thread.run_sync(server.start)
            except BaseException:
                if store is not None:
                    store.close()
                lock.release()
                raise
            with self.mutex:
                self.store, self.server, self.lock = store, server, lock
            log.info(
                "rocksmq store at %s: its owner went away; this process (pid %d) owns it now",
                self.path,
                os.getpid(),
                extra=fields("rocksmq"),
            )
            _start_maintenance(self)
        finally:
            self.taking_over = False

    def the_link(self) -> Link:
        if self.link is None:
            self.link = Link(self.path, self.timeout_s, self.take_over)
        return self.link

    def close(self) -> None:
        """Let go of the store: stop serving (attached processes see the connection end),
        close RocksDB, remove the socket, release the lock -- in that order, so whoever
        takes the lock next can open the store."""
        self.closed = True
        if self.maintenance is not None:
            self.maintenance.cancel()
        if self.link is not None:
            self.link.close()
        if self.server is not None:
            self.server.stop()
        if self.store is not None:
            self.store.close()
        if self.lock is not None:
            if self.server is not None:
                remove_socket(self.path)
            self.lock.release()


_OPEN: dict[tuple[str, bool], _Shared] = {}
_FORKED_AWAY: list[_Shared] = []
"""What a forked child inherited from ``_OPEN``: never used (its RocksDB handle and
threads are the parent's), never closed (that would touch them), only kept."""


def _forget_open_stores() -> None:
    """After a fork: the child opens its stores afresh (attaching to its parent)."""
    _FORKED_AWAY.extend(_OPEN.values())
    _OPEN.clear()


os.register_at_fork(after_in_child=_forget_open_stores)


def _try_lock(path: str, sharing: str) -> OwnerLock | None:
    try:
        return OwnerLock.try_acquire(path, sharing)
    except OSError as exc:
        raise store_error(path, exc, "taking the store's owner lock") from exc


def _locked_error(path: str, sharing: str, pid: int | None) -> StoreLockedError:
    holder = f"process {pid}" if pid is not None else "another process"
    if sharing == "exclusive":
        hint = (
            f"{holder} owns it and rocksmq.sharing is exclusive here: set rocksmq.sharing: "
            "auto to attach to that process, or stop it"
        )
    else:
        hint = (
            f"{holder} holds it with rocksmq.sharing: exclusive; set rocksmq.sharing: auto "
            "there to share it, or stop it"
        )
    return StoreLockedError(path, hint)


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
        read_only=read_only or section.sharing == "read_only",
        create=create,
    )


def open_client(
    path: str,
    options: RocksOptions | None = None,
    *,
    max_message_bytes: int = config.STREAM_DEFAULTS.max_message_bytes,
    retention_interval_s: float = 60.0,
    compaction_interval_s: float = 3600.0,
    sharing: Sharing = "auto",
    operation_timeout_s: float = config.STREAM_DEFAULTS.operation_timeout_s,
) -> LogClient | RemoteClient:
    """A client of the store at ``path`` (created if missing unless read-only or
    ``options.create`` is off): a :class:`LogClient` on the store while this process owns
    it (or reads it, ``options.read_only``), a :class:`RemoteClient` while another process
    does (``sharing="auto"``). A path that cannot hold a store raises a
    :class:`~msgstream.backends.rocksmq.errors.StoreError` naming it."""
    options = options or RocksOptions()
    if options.read_only:
        sharing = "read_only"
    path = os.path.abspath(path)
    key = (path, options.read_only)
    intervals = (retention_interval_s, compaction_interval_s)
    shared = _OPEN.get(key)
    if shared is None:
        shared = _Shared(
            path,
            options,
            sharing,
            intervals,
            operation_timeout_s,
            max(MIN_FRAME_LIMIT, max_message_bytes) + FRAME_SLACK,
        )
        shared.open()  # errors name the path (failures.store_error)
        _OPEN[key] = shared
    elif shared.settings != (options, sharing, intervals):
        raise BackendUnavailableError(
            f"the rocksmq store at {path!r} is already open in this process with other "
            f"options ({shared.store.options if shared.store else shared.options}, "
            f"rocksmq.sharing: {shared.sharing}); open it with the same configuration"
        )
    shared.clients += 1

    def release() -> None:
        shared.clients -= 1
        if shared.clients == 0:
            shared.close()
            _OPEN.pop(key, None)

    store = shared.store
    if store is None:
        return RemoteClient(
            shared.the_link(),
            max_message_bytes=max_message_bytes,
            sync=options.sync,
            on_close=release,
        )
    _start_maintenance(shared)
    return LogClient(
        store,
        max_message_bytes=max_message_bytes,
        blocking_writes=options.sync,
        on_use=lambda: _start_maintenance(shared),
        on_close=release,
        on_observe=lambda probe: setattr(shared, "probe", probe),
    )


def _start_maintenance(shared: _Shared) -> None:
    """Run retention in the background of the current event loop (once per loop: a store
    can outlive the loop that opened it)."""
    store = shared.store
    if store is None:
        return
    options = store.options
    if store.read_only or (
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
    assert store is not None
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
        store = shared.store
        if store is None:
            return
        try:  # in a worker thread: a round (and compaction) must not stall the loop
            deleted = await anyio.to_thread.run_sync(_retention_round, shared)
            deleted_since_compaction |= deleted > 0
            if deleted_since_compaction and since_compaction >= compaction_every:
                await anyio.to_thread.run_sync(store.compact)
                since_compaction = 0.0
                deleted_since_compaction = False
        except Exception:  # keep maintaining; a failed round is retried next interval
            with contextlib.suppress(Exception):
                log.exception(
                    "rocksmq retention round failed at %s",
                    store.path,
                    extra=fields("rocksmq"),
                )


def new_client(
    section: RocksmqConfig,
    shared: MsgStreamConfig,
    *,
    read_only: bool = False,
    create: bool = True,
) -> LogClient | RemoteClient:
    """A client of the store at ``rocksmq.path`` (the plug-in's client factory)."""
    return open_client(
        section.resolved_path(),
        options_from_config(section, read_only=read_only, create=create),
        max_message_bytes=shared.max_message_bytes,
        retention_interval_s=section.retention_check_interval_s,
        compaction_interval_s=section.compaction_interval_s,
        sharing=section.sharing,
        operation_timeout_s=shared.operation_timeout_s,
    )


def new_inspection_client(
    section: RocksmqConfig, shared: MsgStreamConfig
) -> LogClient | RemoteClient:
    """A client for looking only (``msgstream inspect``): a store is never created here (a
    mistyped path is an error); one another process owns is reached through that process,
    and one held with ``rocksmq.sharing: exclusive`` is opened read-only instead."""
    try:
        return new_client(section, shared, create=False)
    except StoreLockedError:
        log.info(
            "rocksmq store is held exclusively by another process; opening it read-only",
            extra=fields("rocksmq"),
        )
        return new_client(section, shared, read_only=True)
