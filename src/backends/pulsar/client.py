"""The Pulsar client: one library client, a producer per channel, a consumer per subscription.

A channel is the non-partitioned persistent topic ``persistent://tenant/namespace/channel``,
created by the broker on first use. Existence checks, listings and deletions go through the
admin REST API (see ``admin.py``); everything else through the binary protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

from msgstream.configuration.config import MsgStreamConfig
from msgstream.contract.backend import MessageID, SubscriptionInfo
from msgstream.contract.channels import validate_channel_name, validate_subscription_name
from msgstream.wire.position import SubscriptionPosition

from ..broker_client import BrokerClient
from .admin import PulsarAdmin
from .consumer import PulsarConsumer
from .failures import ERRORS
from .handshake import check_token
from .ids import EARLIEST, PulsarMessageID
from .library import pulsar, pulsar_asyncio
from .producer import PulsarProducer
from .pulsar_private import native_client
from .settings import (
    PulsarConfig,
    admin_token,
    client_kwargs,
    consumer_kwargs,
    operation_timeout_s,
    producer_kwargs,
    service_url,
    tls_context,
    topic_name,
)

_INITIAL_POSITION = {
    SubscriptionPosition.EARLIEST: pulsar.InitialPosition.Earliest,
    SubscriptionPosition.LATEST: pulsar.InitialPosition.Latest,
    # Nothing is read before the seek that must follow; the seek replaces this position.
    SubscriptionPosition.UNKNOWN: pulsar.InitialPosition.Latest,
}


class PulsarClient(BrokerClient):
    """A connection to the Pulsar cluster at ``pulsar.address`` (opened on first use; the
    plug-in's client factory)."""

    backend_name = "pulsar"

    def __init__(self, section: PulsarConfig, shared: MsgStreamConfig) -> None:
        self.section = section
        self.shared = shared
        self.service_url = service_url(section)
        super().__init__(ERRORS, self.service_url, operation_timeout_s(section, shared), shared)
        self.admin = PulsarAdmin(section, self.deadline_s)
        self._inner = pulsar_asyncio.Client(self.service_url, **client_kwargs(section, shared))
        self._producers: set[PulsarProducer] = set()
        self._consumers: set[PulsarConsumer] = set()
        self._credentials_checked = admin_token(section) is None

    @property
    def closed(self) -> bool:
        return self._state.closed

    def _call(self, what: str, channel: str, operation: str) -> Any:
        """A broker call on ``channel`` needing the ``operation`` permission ("write" to
        produce, "read" to consume): a refusal is an ``AuthorizationError`` naming both."""
        return self.calls.call(what, channel, operation)

    def topic(self, channel: str) -> str:
        return topic_name(self.section, channel)

    async def _check_credentials(self) -> None:
        """Once per client: a refused token is an immediate ``AuthenticationError``."""
        if self._credentials_checked:
            return
        token = admin_token(self.section)
        assert token is not None
        tls = tls_context(self.section)
        await check_token(self.service_url, token, tls, min(self.deadline_s, 10.0))
        self._credentials_checked = True

    # ----------------------------------------------------------------- producers, consumers

    async def create_producer(self, channel: str) -> PulsarProducer:
        self.check_open()
        validate_channel_name(channel)
        await self._check_credentials()
        async with self._call(f"creating a producer on channel {channel!r}", channel, "write"):
            inner = await uncancelled(
                self._inner.create_producer(
                    self.topic(channel), **producer_kwargs(self.section, self.shared)
                )
            )
        producer = PulsarProducer(
            channel,
            inner,
            limits=(self.max_message_bytes, self.section.max_message_size),
            operation_timeout_s=self.shared.operation_timeout_s,
            state=self._state,
            forget=self.forget_producer,
            calls=self.calls,
        )
        self._producers.add(producer)
        return producer

    async def open_subscription(
        self, channel: str, subname: str, initial: pulsar.InitialPosition
    ) -> pulsar_asyncio.Consumer:
        """A library consumer on ``subname``; an existing subscription keeps its position."""
        self.check_open()
        await self._check_credentials()
        async with self._call(f"subscribing {subname!r} to channel {channel!r}", channel, "read"):
            return await uncancelled(
                self._inner.subscribe(
                    self.topic(channel),
                    subname,
                    initial_position=initial,
                    **consumer_kwargs(self.section),
                )
            )

    async def subscribe(
        self, channel: str, subname: str, position: SubscriptionPosition
    ) -> PulsarConsumer:
        self.check_open()
        validate_channel_name(channel)
        validate_subscription_name(subname)
        inner = await self.open_subscription(channel, subname, _INITIAL_POSITION[position])
        consumer = PulsarConsumer(
            channel,
            subname,
            inner,
            # Pulsar does not say whether the subscription existed: with UNKNOWN, even a
            # resumed subscription waits for a seek.
            positioned=position is not SubscriptionPosition.UNKNOWN,
            hooks=self._hooks,
            open_subscription=self.open_subscription,
            calls=self.calls,
        )
        self._consumers.add(consumer)
        return consumer

    def forget_consumer(self, consumer: Any) -> None:
        self._consumers.discard(consumer)

    def forget_producer(self, producer: PulsarProducer) -> None:
        self._producers.discard(producer)

    # ----------------------------------------------------------------------------- ids

    def earliest_message_id(self) -> PulsarMessageID:
        return EARLIEST

    def message_id_from_bytes(self, data: bytes) -> PulsarMessageID:
        return PulsarMessageID.parse(data)

    # ------------------------------------------------------------------ admin-backed calls

    async def check_topic_valid(self, channel: str) -> None:
        await self.get_latest_msg_id(channel)

    async def get_latest_msg_id(self, channel: str) -> PulsarMessageID | None:
        self.check_open()
        validate_channel_name(channel)
        return await self.admin.last_message_id(channel)

    async def peek(self, channel: str, msg_id: MessageID) -> bytes | None:
        """One stored message by id, read through the admin API (no subscription)."""
        self.check_open()
        validate_channel_name(channel)
        wanted = PulsarMessageID.parse(msg_id.to_bytes())
        last = await self.admin.last_message_id(channel)
        if last is None or (wanted.ledger, wanted.entry) > (last.ledger, last.entry):
            return None  # not written yet (the admin API answers HTTP 500 for it)
        return await self.admin.message(channel, wanted)

    async def list_channels(self) -> list[str]:
        self.check_open()
        return await self.admin.list_channels()

    async def list_subscriptions(self, channel: str) -> list[SubscriptionInfo]:
        self.check_open()
        validate_channel_name(channel)
        cursors = await self.admin.cursors(channel)
        backlogs = await self.admin.backlogs(channel)
        infos = []
        for name, cursor in sorted(cursors.items()):
            ledger, _, entry = str(cursor.get("markDeletePosition", "")).partition(":")
            acked = None
            with contextlib.suppress(ValueError):
                if int(entry) >= 0:
                    acked = PulsarMessageID(int(ledger), int(entry))
            infos.append(
                SubscriptionInfo(channel=channel, name=name, acked_id=acked, lag=backlogs.get(name))
            )
        return infos

    async def delete_subscription(self, channel: str, subname: str) -> None:
        """Forget ``subname`` on ``channel`` (its consumers must be closed first)."""
        self.check_open()
        validate_channel_name(channel)
        await self.admin.delete_subscription(channel, subname)

    async def delete_channel(self, channel: str) -> None:
        self.check_open()
        validate_channel_name(channel)
        await self.admin.delete_channel(channel)

    # ----------------------------------------------------------------------------- close

    async def close(self) -> None:
        if not await self._state.close_after(self._consumers, self._producers):
            return
        with contextlib.suppress(Exception):
            await close_library_client(self._inner, self.deadline_s)


_late: set[asyncio.Task[Any]] = set()
"""Creations given up on, still running (referenced, so they are not collected)."""


async def uncancelled(creation: Coroutine[Any, Any, Any]) -> Any:
    """Await a library creation (a producer or a consumer) that a deadline must not cancel.

    ``pulsar.asyncio`` completes a creation in two loop callbacks: the first checks that its
    future is still pending, the second sets the result. A deadline that cancels the future
    between them (both fire at the operation timeout) makes asyncio log an
    ``InvalidStateError`` traceback. So the creation runs in a task the caller's
    cancellation does not reach; when the caller gives up, the task runs on to the
    library's own timeout, and what it then creates is closed."""
    task = asyncio.ensure_future(creation)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        _late.add(task)
        task.add_done_callback(_dispose_late)
        raise


def _dispose_late(task: asyncio.Task[Any]) -> None:
    _late.discard(task)
    if task.cancelled() or task.exception() is not None:
        return  # the library's own error, for a call nobody waits for any more
    closing = asyncio.ensure_future(task.result().close())
    _late.add(closing)
    closing.add_done_callback(_forget_closing)


def _forget_closing(task: asyncio.Task[Any]) -> None:
    _late.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: the client may be gone, which is fine


async def close_library_client(inner: pulsar_asyncio.Client, timeout_s: float) -> None:
    """Close a library client with its blocking ``close()`` on a worker thread.

    ``pulsar_asyncio.Client.close`` hands the library a Python callback, which the thread
    that shuts the client down still holds after reporting the close: a program that ends
    right then has that thread let go of it while the interpreter finalizes, and aborts
    (see ``library_log``). The blocking close waits on a C++ promise instead."""
    await asyncio.wait_for(asyncio.to_thread(native_client(inner).close), timeout_s)
