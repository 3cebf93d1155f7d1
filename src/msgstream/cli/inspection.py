"""``msgstream inspect``: channels, their ids and subscriptions (admin API of a backend),
each subscription's backlog in messages and in time, and channels whose newest time is
behind the others' (a producer that stopped ticking); ``--watch`` refreshes it live."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.table import Table

from ..configuration.config import Config
from ..contract.backend import (
    AdminClient,
    Client,
    MessageID,
    PeekClient,
    RetainedMessagesClient,
    SubscriptionInfo,
)
from ..errors import CodecError
from ..streams.factory import new_inspection_client
from ..wire.codec import peek_header
from .command import Command
from .common import CliError, add_channel_option, add_json_option, new_table, stdout_console
from .output import dumps, format_message_id
from .watching import watch_live


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Per channel: first and latest MessageID, message count, and every subscription with
    its acknowledged id, lag (messages not yet acknowledged), time lag (the newest message's
    time minus the acknowledged one's) and last activity, on every backend (rocksmq,
    memory, Kafka, Pulsar; time lags where the backend can read a message by id). A channel
    whose newest time is behind the others' by more than msgstream.stall_after_ticks tick
    intervals is marked STALLED: a time-tick stream over it waits on it. --watch refreshes
    live. Nothing is created here: an embedded store that does not exist is an error, and
    one that another process holds is opened read-only."""
    add_channel_option(parser, "channel to show (repeat for several; default: all)")
    add_json_option(parser, "print one JSON document (with --watch, one per line and refresh)")
    parser.add_argument(
        "--watch",
        nargs="?",
        type=float,
        const=2.0,
        default=None,
        metavar="SECONDS",
        help="refresh every SECONDS (default 2) until interrupted",
    )


@dataclass
class SubscriptionView:
    name: str
    acked_id: str | None
    lag: int | None
    last_active_ms: int | None
    time_lag_s: float | None = None
    """The newest message's time minus the acknowledged one's (0 with no backlog; None
    when the backend cannot read messages by id or the acknowledged one is gone)."""


@dataclass
class ChannelView:
    channel: str
    latest_id: str | None
    first_id: str | None = None
    messages: int | None = None
    subscriptions: list[SubscriptionView] | None = field(default=None)
    newest_ms: int | None = None
    """The physical time (Unix ms) of the newest message's timestamp (a time tick, most
    often), when the backend can read it."""
    behind_s: float | None = None
    """How far ``newest_ms`` is behind the newest of all channels shown."""
    stalled: bool = False
    """Whether ``behind_s`` exceeds the stall threshold: its producer stopped ticking
    while others did not, so a time-tick stream over these channels waits on it."""


async def open_client(config: Config) -> Client:
    """A client of the configured backend for looking only (the backend decides what that
    takes: :func:`msgstream.streams.factory.new_inspection_client`)."""
    return new_inspection_client(config)


async def _physical_ms(client: Client, channel: str, msg_id: MessageID | None) -> int | None:
    """The physical time of message ``msg_id``'s timestamp, if it can be read."""
    if msg_id is None or not isinstance(client, PeekClient):
        return None
    payload = await client.peek(channel, msg_id)
    if payload is None:
        return None
    try:
        timestamp = peek_header(payload)[2]
    except CodecError:
        return None
    return timestamp >> 18


def _mark_stalls(views: list[ChannelView], threshold_s: float) -> None:
    known = [v.newest_ms for v in views if v.newest_ms is not None]
    if not known:
        return
    newest = max(known)
    for view in views:
        if view.newest_ms is not None:
            view.behind_s = (newest - view.newest_ms) / 1000
            view.stalled = threshold_s > 0 and view.behind_s > threshold_s


async def collect(
    client: Client, channels: list[str] | None, stall_threshold_s: float = 0.0
) -> list[ChannelView]:
    admin = client if isinstance(client, AdminClient) else None
    if channels is None:
        if admin is None:
            raise CliError(
                f"backend {client.backend_name!r} has no admin API (list_channels); "
                "give --channel to see the latest MessageID of given channels"
            )
        channels = list(await admin.list_channels())
    views: list[ChannelView] = []
    for channel in channels:
        latest = await client.get_latest_msg_id(channel)
        view = ChannelView(channel, _fmt(latest))
        view.newest_ms = await _physical_ms(client, channel, latest)
        if isinstance(client, RetainedMessagesClient):
            retained = await client.retained_messages(channel)
            view.messages = 0 if retained is None else retained[1]
            view.first_id = None if retained is None else format_message_id(retained[0])
        if admin is not None:
            infos = await admin.list_subscriptions(channel)
            view.subscriptions = [
                await _subscription(client, info, view.newest_ms) for info in infos
            ]
        views.append(view)
    _mark_stalls(views, stall_threshold_s)
    return views


async def _subscription(
    client: Client, info: SubscriptionInfo, newest_ms: int | None
) -> SubscriptionView:
    acked: str | None = None
    if info.acked_id is not None:
        try:
            nothing = info.acked_id <= client.earliest_message_id()
        except (TypeError, ValueError):
            nothing = False
        acked = None if nothing else format_message_id(info.acked_id)
    time_lag: float | None = None
    if info.lag == 0:
        time_lag = 0.0
    elif newest_ms is not None and acked is not None:
        acked_ms = await _physical_ms(client, info.channel, info.acked_id)
        if acked_ms is not None:
            time_lag = max(newest_ms - acked_ms, 0) / 1000
    return SubscriptionView(info.name, acked, info.lag, info.last_active_ms, time_lag)


def _fmt(msg_id: MessageID | None) -> str | None:
    return None if msg_id is None else format_message_id(msg_id)


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    stamp = datetime.fromtimestamp(ms / 1000).astimezone().strftime("%m-%d %H:%M:%S")
    ago = max(time.time() - ms / 1000, 0.0)
    return f"{_ago(ago)} ago ({stamp})"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"


def to_json(backend: str, views: list[ChannelView]) -> dict[str, Any]:
    return {
        "backend": backend,
        "channels": [
            {
                "channel": v.channel,
                "first_id": v.first_id,
                "latest_id": v.latest_id,
                "messages": v.messages,
                "newest_ms": v.newest_ms,
                "behind_s": v.behind_s,
                "stalled": v.stalled,
                "subscriptions": None
                if v.subscriptions is None
                else [
                    {
                        "name": s.name,
                        "acked_id": s.acked_id,
                        "lag": s.lag,
                        "last_active_ms": s.last_active_ms,
                        "time_lag_s": s.time_lag_s,
                    }
                    for s in v.subscriptions
                ],
            }
            for v in views
        ],
    }


def render(backend: str, views: list[ChannelView]) -> Table:
    table = new_table(
        f"msgstream channels ({backend})",
        [
            ("channel", "left"),
            ("first id", "right"),
            ("latest id", "right"),
            ("messages", "right"),
            ("behind", "right"),
            ("subscription", "left"),
            ("acked id", "right"),
            ("lag", "right"),
            ("time lag", "right"),
            ("last active", "left"),
        ],
    )
    for view in views:
        behind = _seconds(view.behind_s) + (" STALLED" if view.stalled else "")
        head = [
            view.channel,
            view.first_id or "-",
            view.latest_id or "-",
            "-" if view.messages is None else str(view.messages),
            behind,
        ]
        subs = view.subscriptions
        if subs is None:
            table.add_row(*head, "(no admin API)", "-", "-", "-", "-")
            continue
        if not subs:
            table.add_row(*head, "(none)", "-", "-", "-", "-")
            continue
        for i, sub in enumerate(subs):
            cells = head if i == 0 else [""] * len(head)
            table.add_row(
                *cells,
                sub.name,
                sub.acked_id or "-",
                "-" if sub.lag is None else str(sub.lag),
                _seconds(sub.time_lag_s),
                _when(sub.last_active_ms),
            )
    return table


async def handle(config: Config, args: argparse.Namespace) -> int:
    channels: list[str] | None = list(args.channels) if args.channels else None
    section = config.msgstream
    threshold_s = section.tick_interval_s * section.stall_after_ticks
    if args.watch is not None:
        if args.watch <= 0:
            raise CliError(f"--watch needs a positive number of seconds, got {args.watch}")
        return await _watch(config, channels, threshold_s, args.watch, as_json=args.json)
    client = await open_client(config)
    try:
        views = await collect(client, channels, threshold_s)
    finally:
        await client.close()
    backend = client.backend_name
    if args.json:
        print(dumps(to_json(backend, views)), flush=True)
        return 0
    out = stdout_console()
    if not views:
        out.print(f"no channels ({backend})", markup=False)
        return 0
    out.print(render(backend, views))
    return 0


async def _watch(
    config: Config, channels: list[str] | None, threshold_s: float, every_s: float, *, as_json: bool
) -> int:
    """Refresh until interrupted: a live table, or one JSON line per refresh. The client
    stays open (the embedded store read-only when another process writes it)."""
    client = await open_client(config)
    backend = client.backend_name
    try:
        if as_json:
            while True:
                views = await collect(client, channels, threshold_s)
                print(dumps(to_json(backend, views)), flush=True)
                await asyncio.sleep(every_s)

        async def table() -> Table:
            return render(backend, await collect(client, channels, threshold_s))

        await watch_live(table, every_s)
    finally:
        await client.close()
    return 0


COMMAND = Command.documented(
    "inspect",
    "show channels, message ids and subscriptions with their lag",
    add_arguments,
    handle,
)
