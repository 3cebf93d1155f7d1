"""Leader failover on a real 3-node Kafka cluster (KRaft, replication 3, min ISR 2).

Each failover test runs on both engines (aiokafka and confluent-kafka, each with its
idempotent producer), writes to fresh channels, SIGKILLs the node leading a channel's
partition while messages are in flight, and checks what the contract promises: every
acknowledged message is delivered, in order, and a TtMsgStream delivers each message
exactly once. What the producer saw (acknowledged, failed, lost, duplicated, the longest
wait) is printed as a ``failover:`` line for the chaos table.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from brokers.fixtures import _start_or_fail
from brokers.kafka_cluster import LocalKafkaCluster
from msgstream import (
    BackendUnavailableError,
    MsgPack,
    MsgStream,
    SubscriptionPosition,
    TimeTickEmitter,
    TtMsgStream,
    repack_by_first_key,
)
from test_kafka_backend import channel_name, client_for, delete_msg
from workload import Event, to_message

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

EARLIEST = SubscriptionPosition.EARLIEST
SENTINEL = 1_000_000_000
"""The id of the message sent last, once the cluster is whole again: reading up to it
means every earlier record of the channel was read."""

IDEMPOTENT = {
    "aiokafka": {"producer": {"enable_idempotence": True}},
    "confluent": {"confluent": {"enable.idempotence": True}},
}
"""Each engine's idempotent producer, through its pass-through section (``kafka.producer``
for aiokafka, ``kafka.confluent`` for librdkafka): a batch it retries after the leader
died is written once, not twice."""

WAIT = 60.0
"""Longest wait for anything in a test (a failover takes seconds; this is a backstop)."""


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaCluster]:
    def start() -> LocalKafkaCluster:
        cluster = LocalKafkaCluster(Path(tmp_path_factory.mktemp("kafka-cluster")))
        try:
            cluster.start()
        except BaseException:
            cluster.close()
            raise
        return cluster

    cluster: LocalKafkaCluster = _start_or_fail("Kafka cluster", start)
    yield cluster
    cluster.close()


@pytest.fixture
async def cluster(kafka_cluster: LocalKafkaCluster) -> AsyncIterator[LocalKafkaCluster]:
    """The cluster with every node running; a node a test killed is running again after."""
    await asyncio.to_thread(kafka_cluster.start)
    yield kafka_cluster
    await asyncio.to_thread(kafka_cluster.start)


@pytest.fixture(params=list(IDEMPOTENT))
def engine(request: pytest.FixtureRequest) -> str:
    """The engine of the failover tests' clients (each test runs on both)."""
    return str(request.param)


def cluster_client(cluster: LocalKafkaCluster, deadline_s: float, engine: str) -> Any:
    return client_for(
        cluster.bootstrap,
        operation_timeout_s=deadline_s,
        client=engine,
        replication_factor=3,
        topic_config={"min.insync.replicas": 2},
        **IDEMPOTENT[engine],
    )


def test_nodes_share_one_quorum_and_differ_only_in_identity(tmp_path: Path) -> None:
    cluster = LocalKafkaCluster(tmp_path)  # not started: only its configuration
    configs = []
    for node in cluster.nodes.values():
        pairs = [line.split("=", 1) for line in node._server_properties().splitlines()]
        keys = [key for key, _ in pairs]
        assert len(keys) == len(set(keys)), keys  # no key set twice
        configs.append(dict(pairs))
    assert [c["node.id"] for c in configs] == ["1", "2", "3"]
    voters = ",".join(f"{i}@127.0.0.1:{n.controller_port}" for i, n in cluster.nodes.items())
    assert {c["controller.quorum.voters"] for c in configs} == {voters}
    assert all("controller.quorum.bootstrap.servers" not in c for c in configs)
    assert {(c["default.replication.factor"], c["min.insync.replicas"]) for c in configs} == {
        ("3", "2")
    }
    ports = [p for n in cluster.nodes.values() for p in (n.port, n.sasl_port, n.controller_port)]
    assert len(set(ports)) == 9


async def test_topics_get_three_replicas_and_need_two_in_sync(
    cluster: LocalKafkaCluster,
) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    channel = channel_name("cluster-defaults")
    # min.insync.replicas is not in the topic's config: it comes from the cluster.
    async with MsgStream(client_for(cluster.bootstrap, replication_factor=3)) as stream:
        await stream.as_producer([channel])
        await stream.produce(MsgPack.of(delete_msg(1)))
    state = await asyncio.to_thread(cluster.wait_fully_replicated, channel)
    assert sorted(state.replicas) == [1, 2, 3]
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, channel)]
        )
    finally:
        await admin.close()
    [(_, _, _, _, entries)] = response.resources
    assert {e[0]: e[1] for e in entries}["min.insync.replicas"] == "2"


async def test_replication_factor_minus_one_takes_the_cluster_default(
    cluster: LocalKafkaCluster,
) -> None:
    channel = channel_name("cluster-default-rf")
    async with MsgStream(client_for(cluster.bootstrap, replication_factor=-1)) as stream:
        await stream.as_producer([channel])
    state = await asyncio.to_thread(cluster.wait_fully_replicated, channel)
    assert sorted(state.replicas) == [1, 2, 3]


@dataclass
class Failover:
    """What a producer saw while the partition leader was killed."""

    leader: int
    acked: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    longest_wait_s: float = 0.0
    """Longest time one send took, acknowledged or not."""
    longest_gap_s: float = 0.0
    """Longest time between two acknowledgements: how long writes stood still."""
    first_error_s: float | None = None
    """From the kill to the first failed send."""
    killed_at: float | None = None

    def report(self, what: str, received: list[int]) -> str:
        counts = Counter(received)
        lost = [i for i in self.acked if i not in counts]
        first_error = "-" if self.first_error_s is None else f"{self.first_error_s:.2f}s"
        return (
            f"failover: {what}: leader node {self.leader} SIGKILLed; "
            f"acknowledged {len(self.acked)}, failed {len(self.failed)} "
            f"(of which delivered {sum(1 for i in self.failed if i in counts)}), "
            f"lost {len(lost)}, duplicated {sum(n - 1 for n in counts.values())}, "
            f"longest send {self.longest_wait_s:.2f}s, longest gap between acks "
            f"{self.longest_gap_s:.2f}s, first error after {first_error}"
        )


async def produce_through_failover(
    cluster: LocalKafkaCluster,
    stream: MsgStream,
    channel: str,
    *,
    before: int = 100,
    after: int = 100,
    batch: int = 1,
) -> Failover:
    """Send Deletes 1, 2, ... to ``channel`` one after another, ``batch`` per pack (more
    than one goes through the batched send path); once ``before`` are
    acknowledged, SIGKILL the partition's leader (the sends go on meanwhile), and stop
    ``after`` acknowledgements after it is dead. A send the cluster cannot take must fail with
    :class:`BackendUnavailableError`; anything else fails the test."""
    await asyncio.to_thread(cluster.wait_fully_replicated, channel)
    failover = Failover(leader=await asyncio.to_thread(cluster.leader_of, channel))
    warmed_up = asyncio.Event()
    killed: int | None = None
    """Acknowledgements counted when the leader was gone."""

    async def send_all() -> None:
        last_ack = time.monotonic()
        for first in range(1, SENTINEL, batch):
            ids = range(first, first + batch)
            started = time.monotonic()
            try:
                await stream.produce(MsgPack(msgs=[delete_msg(i) for i in ids]))
            except BackendUnavailableError as exc:
                failover.failed.extend(ids)
                failover.errors.append(str(exc))
                if failover.killed_at is not None and failover.first_error_s is None:
                    failover.first_error_s = time.monotonic() - failover.killed_at
            else:
                failover.acked.extend(ids)
                if failover.killed_at is not None:  # measure the failover only
                    gap = time.monotonic() - max(last_ack, failover.killed_at)
                    failover.longest_gap_s = max(failover.longest_gap_s, gap)
                last_ack = time.monotonic()
            if failover.killed_at is not None:
                waited = time.monotonic() - max(started, failover.killed_at)
                failover.longest_wait_s = max(failover.longest_wait_s, waited)
            if len(failover.acked) >= before:
                warmed_up.set()
            if killed is not None and len(failover.acked) >= killed + after:
                return

    sender = asyncio.create_task(send_all())
    await asyncio.wait_for(warmed_up.wait(), WAIT)
    failover.killed_at = time.monotonic()
    await asyncio.to_thread(cluster.kill_node, failover.leader)
    killed = len(failover.acked)
    await asyncio.wait_for(sender, WAIT)
    return failover


async def read_until_sentinel(stream: MsgStream) -> list[int]:
    """Every message id up to (not including) the sentinel, in channel order."""
    received: list[int] = []
    while True:
        pack = await asyncio.wait_for(anext(stream), WAIT)
        for msg in pack.msgs:
            if msg.msg_id == SENTINEL:
                return received
            received.append(msg.msg_id)


def check_every_acknowledged_in_order(failover: Failover, received: list[int]) -> None:
    assert failover.acked and all("kafka" in e for e in failover.errors)
    missing = [i for i in failover.acked if i not in set(received)]
    assert missing == []
    first_positions = {}
    for position, msg_id in enumerate(received):
        first_positions.setdefault(msg_id, position)
    positions = [first_positions[i] for i in failover.acked]
    assert positions == sorted(positions)
    # Nothing is invented: whatever was read was sent (acknowledged or failed).
    assert set(received) <= {*failover.acked, *failover.failed}


async def test_acknowledged_sends_survive_a_leader_kill(
    cluster: LocalKafkaCluster, engine: str
) -> None:
    channel = channel_name("failover")
    # A short deadline, so sends the failover holds up fail (typed) rather than wait.
    async with MsgStream(cluster_client(cluster, 3.0, engine)) as producer:
        await producer.as_producer([channel])
        failover = await produce_through_failover(cluster, producer, channel)
        restart = asyncio.create_task(asyncio.to_thread(cluster.restart_node, failover.leader))
        await producer.produce(MsgPack.of(delete_msg(SENTINEL)))
    async with MsgStream(cluster_client(cluster, 20.0, engine)) as consumer:
        await consumer.as_consumer([channel], "after", EARLIEST)
        received = await read_until_sentinel(consumer)
    await restart
    print(failover.report(f"produce, idempotent, 3 s deadline, {engine}", received))
    check_every_acknowledged_in_order(failover, received)
    assert len(received) == len(set(received))  # the idempotent producer wrote each once


async def test_a_reading_consumer_carries_on_through_a_leader_kill(
    cluster: LocalKafkaCluster, engine: str
) -> None:
    channel = channel_name("failover-read")
    async with (
        MsgStream(cluster_client(cluster, 20.0, engine)) as producer,
        MsgStream(cluster_client(cluster, 20.0, engine)) as consumer,
    ):
        await producer.as_producer([channel])
        await consumer.as_consumer([channel], "during", EARLIEST)
        reader = asyncio.create_task(read_until_sentinel(consumer))
        failover = await produce_through_failover(
            cluster, producer, channel, before=300, after=300, batch=10
        )
        restart = asyncio.create_task(asyncio.to_thread(cluster.restart_node, failover.leader))
        await producer.produce(MsgPack.of(delete_msg(SENTINEL)))
        received = await asyncio.wait_for(reader, WAIT)
    await restart
    print(
        failover.report(f"consume while producing packs of 10, 20 s deadline, {engine}", received)
    )
    check_every_acknowledged_in_order(failover, received)
    assert received == failover.acked  # nothing failed, nothing twice, nothing skipped


async def test_ttmsgstream_delivers_each_message_once_across_a_leader_kill(
    cluster: LocalKafkaCluster, engine: str
) -> None:
    """Producers stamp each message from a :class:`TimeTickEmitter` and retry a failed
    send under the same timestamp, so every copy a retry may leave lands in one pack,
    where the TtMsgStream drops the repeat: each message is read exactly once."""
    channels = [channel_name(f"failover-tt{c}") for c in range(3)]
    workers, per_worker, kill_after = 3, 80, 60
    sent: list[tuple[str, int]] = []
    retries = 0
    halfway = asyncio.Event()
    producer = MsgStream(cluster_client(cluster, 3.0, engine), repack=repack_by_first_key)
    await producer.as_producer(channels)
    for channel in channels:
        await asyncio.to_thread(cluster.wait_fully_replicated, channel)
    leader = await asyncio.to_thread(cluster.leader_of, channels[0])

    async def worker(worker_id: int, emitter: TimeTickEmitter) -> None:
        nonlocal retries
        for i in range(per_worker):
            async with emitter.reserve() as ts:
                msg = to_message(Event(i % len(channels), False, ts, worker_id * 10_000 + i))
                while True:
                    try:
                        result = await producer.produce(MsgPack.of(msg))
                        break
                    except BackendUnavailableError:
                        retries += 1
                sent.extend((channel, msg.msg_id) for channel in result)
                if len(sent) == kill_after:
                    halfway.set()

    async def kill_halfway() -> None:
        await halfway.wait()
        await asyncio.to_thread(cluster.kill_node, leader)

    async with TtMsgStream(cluster_client(cluster, 20.0, engine), pursuit_lag_s=0) as consumer:
        await consumer.as_consumer(channels, "tt", EARLIEST)
        async with TimeTickEmitter(producer, interval_s=0.05) as emitter:
            await asyncio.wait_for(
                asyncio.gather(kill_halfway(), *(worker(w, emitter) for w in range(workers))),
                WAIT,
            )
        restart = asyncio.create_task(asyncio.to_thread(cluster.restart_node, leader))
        got: list[tuple[str, int]] = []
        end_ts = 0
        while end_ts < emitter.last_tick:
            pack = await asyncio.wait_for(anext(consumer), WAIT)
            end_ts = pack.end_ts
            assert all(m.position is not None for m in pack.msgs)
            got.extend((m.position.channel, m.msg_id) for m in pack.msgs if m.position)
        dropped = consumer.barrier.stats.duplicates_dropped
    await producer.close()
    await restart
    print(
        f"failover: TtMsgStream over {len(channels)} channels, {engine}: leader node {leader} "
        f"SIGKILLed; sent {len(sent)}, send retries {retries}, delivered {len(got)}, "
        f"duplicates dropped by the TtMsgStream {dropped}"
    )
    assert len(sent) == workers * per_worker
    assert sorted(got) == sorted(sent)
    assert len(set(got)) == len(got)
