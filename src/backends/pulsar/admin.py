"""The few Pulsar admin REST calls msgstream needs.

The binary protocol cannot tell whether a topic exists without creating it (a broker that
auto-creates topics answers a metadata request for a missing topic with "0 partitions"),
and cannot list or delete topics; the admin API (``pulsar.admin_url``) can. Requests are
plain HTTP through urllib, run in a worker thread so the event loop never blocks.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

import anyio

from msgstream.errors import (
    AuthenticationError,
    BackendUnavailableError,
    MsgStreamError,
    TopicNotFoundError,
)

from .failures import UNTRUSTED_HINT, is_untrusted_certificate, not_authorized
from .ids import PulsarMessageID
from .settings import PulsarConfig, admin_token, admin_url, tls_context


class PulsarAdmin:
    """Admin calls on the topics of one tenant/namespace."""

    def __init__(self, section: PulsarConfig, timeout_s: float) -> None:
        self.url = admin_url(section)
        self._base = f"{self.url}/admin/v2/persistent/{section.tenant}/{section.namespace}"
        self._prefix = f"persistent://{section.tenant}/{section.namespace}/"
        self._timeout = timeout_s
        self._headers = {"Accept": "application/json"}
        token = admin_token(section)
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._ssl = tls_context(section) if self.url.startswith("https://") else None

    # ------------------------------------------------------------------------- topics

    async def last_message_id(self, channel: str) -> PulsarMessageID | None:
        """The id of the channel's last message (None when empty); ``TopicNotFoundError`` if the
        channel does not exist."""
        found = await self._call("GET", f"/{channel}/lastMessageId", channel=channel)
        ledger, entry = int(found["ledgerId"]), int(found["entryId"])
        if ledger < 0 or entry < 0:
            return None
        return PulsarMessageID(ledger, entry, int(found.get("batchIndex", -1)))

    async def message(self, channel: str, msg_id: PulsarMessageID) -> bytes | None:
        """The payload of one stored message (None when it is gone, or is one of several in
        a batched entry: the admin API returns whole entries)."""
        path = f"/{channel}/ledger/{msg_id.ledger}/entry/{msg_id.entry}"
        found = await anyio.to_thread.run_sync(self._entry, path, channel)
        if found is None:
            return None
        body, batched = found
        return None if batched else body

    async def list_channels(self) -> list[str]:
        return await anyio.to_thread.run_sync(self._channel_names)

    def _channel_names(self) -> list[str]:
        topics = self._request("GET", "", None)
        return sorted(
            name.removeprefix(self._prefix)
            for name in topics
            if name.startswith(self._prefix) and "-partition-" not in name
        )

    async def cursors(self, channel: str) -> dict[str, Any]:
        """Per subscription: its ``markDeletePosition`` ("ledger:entry") among others."""
        stats = await self._call("GET", f"/{channel}/internalStats", channel=channel)
        cursors: dict[str, Any] = stats.get("cursors", {})
        return cursors

    async def backlogs(self, channel: str) -> dict[str, int]:
        """Per subscription: the messages not yet acknowledged."""
        stats = await self._call("GET", f"/{channel}/stats", channel=channel)
        return {
            name: int(sub.get("msgBacklog", 0))
            for name, sub in stats.get("subscriptions", {}).items()
        }

    async def delete_subscription(self, channel: str, subname: str) -> None:
        """Forget a subscription; it must have no connected consumer."""
        await self._call(
            "DELETE", f"/{channel}/subscription/{quote(subname, safe='')}", channel=channel
        )

    async def delete_channel(self, channel: str) -> None:
        """Delete a topic and its subscriptions (``force``: even with clients connected)."""
        await self._call("DELETE", f"/{channel}?force=true", channel=channel)

    # ----------------------------------------------------------------------- internals

    async def _call(self, method: str, path: str, *, channel: str | None = None) -> Any:
        return await anyio.to_thread.run_sync(self._request, method, path, channel)

    def _request(self, method: str, path: str, channel: str | None) -> Any:
        try:
            body, _ = self._send(method, path, channel, self._headers)
        except _NotFound:
            assert channel is not None
            raise TopicNotFoundError(channel, "pulsar", self._names_if_listable()) from None
        return json.loads(body) if body.strip() else None

    def _names_if_listable(self) -> list[str]:
        """The namespace's channels, for a missing one's "did you mean"; none when they
        cannot be listed (the channel's absence is the error worth reporting)."""
        try:
            return self._channel_names()
        except MsgStreamError:
            return []

    def _entry(self, path: str, channel: str) -> tuple[bytes, bool] | None:
        """An entry's raw bytes and whether it is a batch of several messages; None when
        the broker has no such entry (any other failure raises as every call does)."""
        headers = {**self._headers, "Accept": "*/*"}
        try:
            body, reply_headers = self._send("GET", path, channel, headers)
        except _NotFound:
            return None  # the admin API answers 404 for a missing entry too
        batched = int(reply_headers.get("X-Pulsar-num-batch-message", "1") or "1") > 1
        return body, batched

    def _send(
        self, method: str, path: str, channel: str | None, headers: dict[str, str]
    ) -> tuple[bytes, Any]:
        url = f"{self._base}{path}"
        request = urllib.request.Request(url, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._ssl) as reply:
                return reply.read(), reply.headers
        except urllib.error.HTTPError as exc:
            reason = _reason(exc)
            if exc.code == 404 and channel is not None and "subscription" not in path:
                raise _NotFound from None
            if channel is not None and _is_refused_permission(exc.code, reason):
                operation = "delete" if method == "DELETE" else "read"
                raise not_authorized(
                    channel, operation, self.url, f"{method} {path}", f"HTTP {exc.code}: {reason}"
                ) from None
            if exc.code in (401, 403):
                raise AuthenticationError(
                    f"pulsar admin at {self.url}: {method} {path or '/'}: "
                    f"authentication failed (HTTP {exc.code}: {reason})"
                ) from None
            raise BackendUnavailableError(
                f"pulsar admin at {self.url}: {method} {path or '/'} failed: "
                f"HTTP {exc.code}: {reason}"
            ) from None
        except (OSError, ValueError) as exc:  # URLError, timeouts, refused connections
            if is_untrusted_certificate(exc):
                raise BackendUnavailableError(
                    f"pulsar admin at {self.url}: {method} {path or '/'}: {UNTRUSTED_HINT} ({exc})"
                ) from exc
            raise BackendUnavailableError(
                f"pulsar admin at {self.url} (pulsar.admin_url) cannot be reached: "
                f"{method} {path or '/'}: {exc}"
            ) from exc


class _NotFound(Exception):
    """The admin API answered 404 about a channel: the channel, or (reading an entry) the
    entry, does not exist. Callers turn it into what it means for them."""


def _is_refused_permission(code: int, reason: str) -> bool:
    """A known role without the permission. Pulsar answers 401 for both a refused identity
    ("Authentication required") and a refused operation ("Unauthorized to ..."), 403 for
    some refused operations."""
    return code == 403 or (code == 401 and reason.startswith("Unauthorized to"))


def _reason(error: urllib.error.HTTPError) -> str:
    try:
        body = error.read().decode("utf-8", "replace")
        reason = json.loads(body).get("reason")
        return str(reason) if reason else body[:200]
    except (OSError, ValueError, AttributeError):
        return str(error.reason)
