"""What the networked backends' clients (Kafka, Pulsar) share: the deadline of one call,
the error mapping bound to the cluster, the open/closed state, and the hooks their
consumers are handed (see :class:`~msgstream.contract.consumer_base.ClientHooks`); and what their
consumers share, the broker calls of one subscription to one channel."""

from __future__ import annotations

from typing import Any

from msgstream.configuration.config import MsgStreamConfig
from msgstream.contract.backend import MessageID
from msgstream.contract.consumer_base import ClientHooks, ClientState, ConsumerBase

from .broker_errors import BrokerCalls, BrokerErrors


class BrokerClient:
    """The base of a networked backend's client; a subclass answers the channel queries
    its consumers forward and stops tracking a consumer that closed."""

    inline_sends = False

    def __init__(
        self, errors: BrokerErrors, where: str, deadline_s: float, shared: MsgStreamConfig
    ) -> None:
        self.deadline_s = deadline_s
        self.max_message_bytes = shared.max_message_bytes
        self.calls = BrokerCalls(errors, where, deadline_s)
        """The error mapping bound to this cluster and deadline, for this client's parts."""
        self._state = ClientState(f"{errors.backend} client")
        self._hooks = ClientHooks(
            self._state, self.get_latest_msg_id, self.check_topic_valid, self.forget_consumer
        )

    def check_open(self) -> None:
        self._state.check_open()

    async def get_latest_msg_id(self, channel: str) -> MessageID | None:
        raise NotImplementedError

    async def check_topic_valid(self, channel: str) -> None:
        raise NotImplementedError

    def forget_consumer(self, consumer: Any) -> None:
        """A consumer of this client closed: stop tracking it."""
        raise NotImplementedError


class BrokerConsumer(ConsumerBase):
    """The base of a networked backend's consumer: its calls to the broker."""

    def __init__(self, channel: str, subname: str, hooks: ClientHooks, calls: BrokerCalls) -> None:
        super().__init__(channel, subname, hooks)
        self._calls = calls

    def _call(self, what: str) -> Any:
        """A broker call of this consumer: an ACL refusal is one to read the channel (its
        topic, or its subscription)."""
        return self._calls.call(
            f"{what} (channel {self.channel!r}, subscription {self.subname!r})",
            self.channel,
            "read",
        )
