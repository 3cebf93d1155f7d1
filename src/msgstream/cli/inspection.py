"""``msgstream inspect``: channels, their ids and subscriptions (admin API of a backend)."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.table import Table

from ..backend import AdminClient, Client, MessageID, RetainedMessagesClient, SubscriptionInfo
from ..config import Config
from ..factory import new_inspection_client
from .command import Command
from .common import CliError, add_channel_option, add_json_option, new_table, stdout_console
from .output import dumps, format_message_id


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Per channel: first and latest MessageID, message count, and every subscription with
    its acknowledged id, lag (messages not yet acknowledged) and last activity, on every
    backend (rocksmq, memory, Kafka, Pulsar). Nothing is created here: an embedded store
    that does not exist is an error, and one that another process holds is opened
    read-only."""
    add_channel_option(parser, "channel to show (repeat for several; default: all)")
    add_json_option(parser)


@dataclass
class SubscriptionView:
    name: str
    acked_id: str | None
    lag: int | None
    last_active_ms: int | None


@dataclass
class ChannelView:
    channel: str
    latest_id: str | None
    first_id: str | None = None
    messages: int | None = None
    subscriptions: list[SubscriptionView] | None = field(default=None)


async def open_client(config: Config) -> Client:
    """A client of the configured backend for looking only (the backend decides what that
    takes: :func:`msgstream.factory.new_inspection_client`)."""
    return new_inspection_client(config)


async def collect(client: Client, channels: list[str] | None) -> list[ChannelView]:
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
        view = ChannelView(channel, _fmt(await client.get_latest_msg_id(channel)))
        if isinstance(client, RetainedMessagesClient):
            retained = await client.retained_messages(channel)
            view.messages = 0 if retained is None else retained[1]
            view.first_id = None if retained is None else format_message_id(retained[0])
        if admin is not None:
            infos = await admin.list_subscriptions(channel)
            view.subscriptions = [_subscription(client, info) for info in infos]
        views.append(view)
    return views


def _subscription(client: Client, info: SubscriptionInfo) -> SubscriptionView:
    acked: str | None = None
    if info.acked_id is not None:
        try:
            nothing = info.acked_id <= client.earliest_message_id()
        except (TypeError, ValueError):
            nothing = False
        acked = None if nothing else format_message_id(info.acked_id)
    return SubscriptionView(info.name, acked, info.lag, info.last_active_ms)


def _fmt(msg_id: MessageID | None) -> str | None:
    return None if msg_id is None else format_message_id(msg_id)


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    stamp = datetime.fromtimestamp(ms / 1000).astimezone().strftime("%m-%d %H:%M:%S")
    ago = max(time.time() - ms / 1000, 0.0)
    return f"{_ago(ago)} ago ({stamp})"


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
                "subscriptions": None
                if v.subscriptions is None
                else [
                    {
                        "name": s.name,
                        "acked_id": s.acked_id,
                        "lag": s.lag,
                        "last_active_ms": s.last_active_ms,
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
            ("subscription", "left"),
            ("acked id", "right"),
            ("lag", "right"),
            ("last active", "left"),
        ],
    )
    for view in views:
        head = [
            view.channel,
            view.first_id or "-",
            view.latest_id or "-",
            "-" if view.messages is None else str(view.messages),
        ]
        subs = view.subscriptions
        if subs is None:
            table.add_row(*head, "(no admin API)", "-", "-", "-")
            continue
        if not subs:
            table.add_row(*head, "(none)", "-", "-", "-")
            continue
        for i, sub in enumerate(subs):
            cells = head if i == 0 else ["", "", "", ""]
            table.add_row(
                *cells,
                sub.name,
                sub.acked_id or "-",
                "-" if sub.lag is None else str(sub.lag),
                _when(sub.last_active_ms),
            )
    return table


async def handle(config: Config, args: argparse.Namespace) -> int:
    channels: list[str] | None = list(args.channels) if args.channels else None
    client = await open_client(config)
    try:
        views = await collect(client, channels)
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


COMMAND = Command.documented(
    "inspect",
    "show channels, message ids and subscriptions with their lag",
    add_arguments,
    handle,
)
