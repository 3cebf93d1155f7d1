"""``msgstream inspect``: channels, their ids and subscriptions (admin API of a backend)."""

from __future__ import annotations

import argparse
import importlib
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.table import Table

from ..backend import Client, MessageID, SubscriptionInfo
from ..config import Config, resolve_backend
from ..errors import StoreLockedError
from ..factory import new_client
from .common import CliError, Subparsers, channel_name, getattr_any, stdout_console
from .output import dumps, format_message_id

log = logging.getLogger(__name__)


def add_parser(sub: Subparsers, parent: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "inspect",
        parents=[parent],
        help="show channels, message ids and subscriptions with their lag",
        description=(
            "Per channel: first and latest MessageID, message count, and every subscription "
            "with its acknowledged id, lag (messages not yet acknowledged) and last activity, "
            "on every backend (rocksmq, memory, Kafka, Pulsar). A rocksmq store is never "
            "created here, and one another process holds is opened read-only."
        ),
    )
    parser.add_argument(
        "--channel",
        dest="channels",
        action="append",
        type=channel_name,
        metavar="C",
        help="channel to show (repeat for several; default: all)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=handle)


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
    """A client of the configured backend. An embedded store is never created here (a
    mistyped path is an error), and one that another process holds open (RocksDB allows
    one writer) is opened read-only instead."""
    if resolve_backend(config) != "rocksmq":
        return new_client(config)
    from msgstream.backends.rocksmq.settings import RocksmqConfig  # loaded only when used

    module = importlib.import_module("msgstream.backends.rocksmq")
    try:
        section = config.section(RocksmqConfig)
        client: Client = module.new_client(section, config.msgstream, create=False)
    except StoreLockedError:
        log.info("rocksmq store is in use by another process; opening it read-only")
        client = module.new_client(section, config.msgstream, read_only=True)
    return client


async def collect(client: Client, channels: list[str] | None) -> list[ChannelView]:
    list_channels = getattr_any(client, "list_channels")
    list_subscriptions = getattr_any(client, "list_subscriptions")
    if channels is None:
        if list_channels is None:
            raise CliError(
                f"backend {client.backend_name!r} has no admin API (list_channels); "
                "give --channel to see the latest MessageID of given channels"
            )
        channels = list(await list_channels())
    views: list[ChannelView] = []
    for channel in channels:
        view = ChannelView(channel, _fmt(await client.get_latest_msg_id(channel)))
        _first_and_count(client, channel, view)
        if list_subscriptions is not None:
            infos: list[SubscriptionInfo] = list(await list_subscriptions(channel))
            view.subscriptions = [_subscription(client, info) for info in infos]
        views.append(view)
    return views


def _first_and_count(client: Client, channel: str, view: ChannelView) -> None:
    """First retained id and message count, where the client exposes its local store."""
    store = getattr_any(client, "store")
    if store is None or not hasattr(store, "first_id") or not hasattr(store, "last_id"):
        return
    first, last = store.first_id(channel), store.last_id(channel)
    if first is None or last is None:
        view.messages = 0
        return
    view.first_id = str(first)
    view.messages = int(last) - int(first) + 1


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
    table = Table(title=f"msgstream channels ({backend})")
    for name, justify in (
        ("channel", "left"),
        ("first id", "right"),
        ("latest id", "right"),
        ("messages", "right"),
        ("subscription", "left"),
        ("acked id", "right"),
        ("lag", "right"),
        ("last active", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
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
