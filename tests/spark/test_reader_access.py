"""What the bridge asks of a backend's plug-in spec (its reader access, whether its
channels leave the process), on in-process and embedded backends (no Spark session).

The bridge names no backend: the embedded store's read-only holds, the default's
durable subscriptions and a backend that offers neither all come from the spec. Kafka's
committed offsets are checked against a real broker by test_spark_source.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from msgstream import Config, MessageID, SubscriptionPosition, config_from_dict, new_client
from msgstream.backends.rocksmq.reader_access import StoreHold, read_only_store
from msgstream.bridge_spark.cli.demo import demo_config
from msgstream.bridge_spark.data.clients import (
    READ_ELSEWHERE,
    READER_ACCESS,
    open_reader,
    resolved_config,
)
from msgstream.bridge_spark.data.offsets import SliceOffset
from msgstream.bridge_spark.data.source import parse_source_options
from msgstream.bridge_spark.data.subscription import drop_subscription, query_subscription
from msgstream.bridge_spark.errors import BackendCapabilityError, OptionError
from msgstream.errors import BackendUnavailableError
from msgstream.streams.reader_access import SUBSCRIPTIONS, SubscriptionHold
from plugin_backend import SPEC, plugged_in
from spark.data import rocksmq_config


def tinylog(store: str) -> Config:
    return config_from_dict({"mq": {"type": "tinylog"}, "tinylog": {"store": store}}, env={})


async def produce(config: Config, channel: str, count: int) -> list[MessageID]:
    client = new_client(config)
    try:
        producer = await client.create_producer(channel)
        return [await producer.send(b"m%d" % i) for i in range(count)]
    finally:
        await client.close()


def offset(position: MessageID | None) -> SliceOffset:
    return SliceOffset(0, {"ch": None if position is None else position.to_bytes()})


async def test_a_backend_without_reader_access_is_named_with_the_capability() -> None:
    with plugged_in(dataclasses.replace(SPEC, reader_access=None)):
        config = tinylog("none")
        for attempt in (lambda: open_reader(config), lambda: resolved_config(config)):
            with pytest.raises(BackendCapabilityError) as info:
                attempt()
            assert str(info.value) == (
                "option 'mq.type': backend 'tinylog' does not offer reader access "
                "(BackendSpec.reader_access): the bridge cannot read its channels; "
                "choose another"
            )
            assert (info.value.backend, info.value.capability) == ("tinylog", READER_ACCESS)
            assert isinstance(info.value, OptionError) and info.value.option == "mq.type"
        with pytest.raises(BackendCapabilityError, match="'tinylog' does not offer reader"):
            await drop_subscription(config, ["ch"], "q")


def test_the_spark_source_refuses_a_backend_whose_channels_stay_in_process() -> None:
    with pytest.raises(BackendCapabilityError) as info:
        parse_source_options({"mq.type": "memory", "channels": "a"})
    assert str(info.value) == (
        "option 'mq.type': backend 'memory' does not offer reading from other processes "
        "(BackendSpec.in_process): its channels exist only in the process that made them, "
        "and the Spark source is read by executor processes (use rocksmq, kafka, pulsar)"
    )
    assert (info.value.backend, info.value.capability) == ("memory", READ_ELSEWHERE)
    # a plugged-in backend is offered by its spec alone
    with plugged_in(), pytest.raises(BackendCapabilityError, match=r"\(use rocksmq, kafka, "):
        parse_source_options({"mq.type": "memory", "channels": "a"})
    in_process = dataclasses.replace(SPEC, in_process=True)
    with plugged_in(in_process), pytest.raises(BackendCapabilityError, match="'tinylog' does"):
        parse_source_options({"mq.type": "tinylog", "tinylog.store": "s", "channels": "a"})


def test_a_reader_access_that_is_not_one_is_a_clear_error() -> None:
    misnamed = dataclasses.replace(SPEC, reader_access="plugin_backend:SPEC")
    with plugged_in(misnamed), pytest.raises(BackendUnavailableError) as info:
        open_reader(tinylog("bad"))
    assert str(info.value) == (
        "backend 'tinylog': its reader_access 'plugin_backend:SPEC' is not a ReaderAccess"
    )


async def test_the_default_hold_is_a_durable_subscription_that_drop_removes() -> None:
    """A backend that declares no reader access of its own is read with an ordinary
    client and held by a durable subscription per channel; dropping the query's removes
    it and its planner's, and nothing else."""
    with plugged_in():
        config = tinylog("default-hold")
        ids = await produce(config, "ch", 5)
        reader = open_reader(config)
        client = reader.client
        try:
            for name in ("q.planner", "other"):
                await (await client.subscribe("ch", name, SubscriptionPosition.EARLIEST)).close()
            subscription = query_subscription(reader, ["ch"], "q")
            assert type(subscription.hold) is SubscriptionHold
            await subscription.ensure(offset(ids[2]))
            await subscription.commit(offset(ids[4]))
            await subscription.close()

            async def names() -> list[str]:
                return sorted(info.name for info in await client.list_subscriptions("ch"))

            assert await names() == ["other", "q", "q.planner"]
            await drop_subscription(config, ["ch"], "q")
            assert await names() == ["other"]
        finally:
            await client.close()


async def test_the_default_seek_reader_is_a_subscription_removed_when_closed() -> None:
    """A backend with no seek reader of its own gives a reader that keeps no position a
    subscription at no position (a seek comes first), and closing it removes it."""
    with plugged_in():
        config = tinylog("default-seek")
        ids = await produce(config, "ch", 3)
        client = open_reader(config).client
        try:
            consumer = await SUBSCRIPTIONS.seek_reader(client, "ch", "q.reader-1")
            await consumer.seek(ids[1], inclusive=True)
            assert (await consumer.receive()).payload == b"m1"
            assert [i.name for i in await client.list_subscriptions("ch")] == ["q.reader-1"]
            await SUBSCRIPTIONS.close_seek_reader(client, consumer, "q.reader-1")
            assert await client.list_subscriptions("ch") == []
        finally:
            await client.close()


async def test_the_embedded_store_is_read_read_only_and_held_by_hold_files(
    tmp_path: Path,
) -> None:
    config = rocksmq_config(tmp_path / "store")
    ids = await produce(config, "ch", 5)
    reader = open_reader(config)
    client = reader.client
    try:
        store = read_only_store(client)
        assert store is not None and store.read_only
        more = await produce(config, "ch", 1)  # the writer's, after the reader opened
        assert await client.get_latest_msg_id("ch") == ids[-1]
        reader.refresh()
        assert await client.get_latest_msg_id("ch") == more[0]

        subscription = query_subscription(reader, ["ch"], "q")
        assert isinstance(subscription.hold, StoreHold)

        def held() -> int | None:
            hold = store.holds.get("ch", "q")
            return None if hold is None else hold.next_id

        await subscription.ensure(offset(ids[2]))
        assert held() == ids[2].sort_key
        await subscription.ensure(offset(ids[4]))  # one that exists stays where it is
        assert held() == ids[2].sort_key
        await subscription.commit(offset(ids[1]))  # never backwards
        assert held() == ids[2].sort_key
        await subscription.commit(offset(ids[4]))
        assert held() == ids[4].sort_key
        await subscription.close()
        assert held() == ids[4].sort_key
        # the store lists the hold with its subscriptions: retention honours both
        assert [info.name for info in await client.list_subscriptions("ch")] == ["q"]
    finally:
        await client.close()
    await drop_subscription(config, ["ch"], "q")
    assert store.holds.of_channel("ch") == []


async def test_a_hold_from_the_channels_beginning_keeps_everything(tmp_path: Path) -> None:
    config = rocksmq_config(tmp_path / "store")
    await produce(config, "ch", 2)
    reader = open_reader(config)
    try:
        await query_subscription(reader, ["ch"], "q").ensure(offset(None))
        store = read_only_store(reader.client)
        assert store is not None
        assert [(h.name, h.next_id) for h in store.holds.of_channel("ch")] == [("q", 0)]
    finally:
        await reader.client.close()
    await drop_subscription(config, ["ch"], "q")


def test_the_resolved_configuration_names_the_backend_and_what_it_depends_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = config_from_dict({"rocksmq": {"path": "~/store"}}, env={})
    resolved = resolved_config(config)
    assert resolved.mq.type == "rocksmq"
    assert resolved.rocksmq.path == str(tmp_path / "store")
    memory = config_from_dict({"mq": {"type": "memory"}, "memory": {"name": "n"}}, env={})
    assert resolved_config(memory) == memory.replace(mq=memory.mq.replace(type="memory"))


def test_the_demo_makes_its_store_where_the_fallback_backend_keeps_one(tmp_path: Path) -> None:
    config = config_from_dict({"kafka": {"brokers": "localhost:9092"}}, env={})
    made = demo_config(config, False, tmp_path)
    assert (made.backend(), made.rocksmq.path) == ("rocksmq", str(tmp_path / "store"))
    given = demo_config(config, True, tmp_path)  # --config and --path: the path is added
    assert (given.mq.type, given.rocksmq.path) == (config.mq.type, str(tmp_path / "store"))
    assert given.kafka == config.kafka
    assert demo_config(config, True, None) is config
