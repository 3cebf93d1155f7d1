"""The aiokafka internals the Kafka backend reads, one function each (see
:mod:`msgstream.runtime.library_internals`; ``tests/test_library_internals.py`` checks each
against the installed aiokafka)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient

from msgstream.runtime.library_internals import internal

__all__ = ["admin_request_sender", "metadata_client"]

_AIOKAFKA = "aiokafka"


def metadata_client(consumer: AIOKafkaConsumer) -> Any:
    """The consumer's ``AIOKafkaClient`` (``_client``): its ``add_topic`` is how aiokafka's
    own offset lookups make the metadata cover a topic; the consumer has no public call
    for it."""
    return internal(consumer, "_client", _AIOKAFKA)


def admin_request_sender(admin: AIOKafkaAdminClient) -> Callable[[Any, int], Awaitable[Any]]:
    """The admin client's ``_send_request(request, node_id)``, which sends a request to a
    broker and returns its response: aiokafka's admin client has no public call for
    DeleteGroups."""
    send: Callable[[Any, int], Awaitable[Any]] = internal(admin, "_send_request", _AIOKAFKA)
    return send
