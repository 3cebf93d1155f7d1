"""A collection's schema as its channels declare it: the first ``CreateCollectionMsg``.

What a producer writes must fit the schema its channels already declare for the
collection, and a reader (``msgstream ingest``, the Spark source) builds its frames from
that same schema; both find it here. The lookup reads what each channel holds now, from
its beginning up to the MessageID newest when it started, decoding only the
``CreateCollectionMsg``s (every other message's header is peeked), through its
backend's seek reader (:meth:`~msgstream.streams.reader_access.ReaderAccess.seek_reader`:
on most backends a private subscription, removed afterwards).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass

import numpy as np

from ..contract.backend import Client, ConsumedBatch, MessageID
from ..errors import CodecError, TopicNotFoundError
from ..observability.logs import fields, get_logger
from ..wire.codec import decode, peek_envelopes, peek_time_range
from ..wire.messages import CreateCollectionMsg, MsgType
from ..wire.schema import CollectionSchema, FieldSchema
from .raw_read import read_through
from .reader_access import SUBSCRIPTIONS, reader_access

log = get_logger(__name__)

_CREATE = int(MsgType.CREATE_COLLECTION)


@dataclass(frozen=True)
class DeclaredSchema:
    """A collection's schema and the channel whose ``CreateCollectionMsg`` declared it."""

    schema: CollectionSchema
    channel: str


async def find_collection_schema(
    client: Client,
    channels: Sequence[str],
    collection: str | None = None,
    *,
    timeout_s: float,
    missing_ok: bool = False,
    subscription: str | None = None,
) -> DeclaredSchema | None:
    """The schema of the first ``CreateCollectionMsg`` (of ``collection``, if given) in
    ``channels``, read channel by channel from their beginning up to each one's newest
    message as of the call; None if there is none.

    A channel that does not exist raises ``TopicNotFoundError`` naming it (before any is
    read), unless ``missing_ok``: then it declares nothing (a producer about to create
    it). Nothing is created. Each channel is read by a seek reader named ``subscription``
    (default: a private name), closed after; a message that cannot be decoded is
    logged with its channel and MessageID and skipped. :class:`ReadIncompleteError` if a
    channel's messages stop arriving for ``timeout_s``."""
    latest: list[tuple[str, MessageID]] = []
    for channel in channels:
        try:
            last = await client.get_latest_msg_id(channel)
        except TopicNotFoundError:
            if not missing_ok:
                raise
            continue
        if last is not None:
            latest.append((channel, last))
    name = subscription or f"msgstream-schema-{secrets.token_hex(4)}"
    access = reader_access(client.backend_name) or SUBSCRIPTIONS
    for channel, last in latest:
        consumer = await access.seek_reader(client, channel, name)
        try:
            await consumer.seek_to_earliest()
            reading = read_through(consumer, last, client.message_id_from_bytes, timeout_s)
            async with aclosing(reading):
                async for batch in reading:
                    for index in _candidates(batch):
                        schema = _declared(batch, index, collection)
                        if schema is not None:
                            return DeclaredSchema(schema, channel)
        finally:
            await access.close_seek_reader(client, consumer, name)
    return None


def _candidates(batch: ConsumedBatch) -> list[int]:
    """The messages of ``batch`` that may be ``CreateCollectionMsg``s: those whose
    envelope says so, read for the whole batch at once; every one when an envelope is
    unreadable (:func:`_declared` then reports it)."""
    envelopes = peek_envelopes(batch.payloads)
    if envelopes is None:
        return list(range(len(batch)))
    found: list[int] = np.flatnonzero(envelopes["msg_type"] == _CREATE).tolist()
    return found


def _declared(batch: ConsumedBatch, index: int, collection: str | None) -> CollectionSchema | None:
    """The schema message ``index`` of ``batch`` declares for ``collection`` (any, if
    None), if it is a ``CreateCollectionMsg`` of it; an undecodable one is logged and
    declares none."""
    payload = batch.payloads[index]
    try:
        if peek_time_range(payload)[0] != _CREATE:
            return None
        msg = decode(payload)
    except CodecError as exc:
        log.warning(
            "skipping undecodable message on channel %r at MessageID %r: %s",
            batch.channel,
            batch.message(index).msg_id,
            exc,
            extra=fields(channel=batch.channel),
        )
        return None
    if isinstance(msg, CreateCollectionMsg) and (
        collection is None or msg.collection_name == collection
    ):
        return msg.schema
    return None


def schema_difference(declared: CollectionSchema, other: CollectionSchema) -> str | None:
    """How ``other`` differs from ``declared``, in a few words (the first difference
    found); None if they are equal."""
    if other == declared:
        return None
    theirs = {f.name: f for f in declared.fields}
    ours = {f.name: f for f in other.fields}
    for spec in other.fields:
        if spec.name not in theirs:
            return f"field {spec.name!r} is not declared"
    for spec in declared.fields:
        if spec.name not in ours:
            return f"declared field {spec.name!r} is missing"
        if ours[spec.name] != spec:
            return (
                f"field {spec.name!r} is declared {describe_field(spec)}, "
                f"not {describe_field(ours[spec.name])}"
            )
    if list(theirs) != list(ours):
        return f"the fields are declared in another order: {list(theirs)}"
    return "the descriptions differ"


def describe_field(spec: FieldSchema) -> str:
    """``float_vector[8] nullable``, ``int64 primary key``: a field's type in words."""
    words = [f"{spec.dtype.value}[{spec.dim}]" if spec.dtype.is_vector else spec.dtype.value]
    if spec.is_primary:
        words.append("primary key")
    if spec.nullable:
        words.append("nullable")
    if spec.description:
        words.append(f"({spec.description!r})")
    return " ".join(words)
