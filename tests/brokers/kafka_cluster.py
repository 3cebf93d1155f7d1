"""A real 3-node Apache Kafka cluster for failover tests, as local JVMs on loopback.

Each node is a :class:`~brokers.kafka.LocalKafka` (same jars, listeners, storage
formatting, start/stop/kill) running as combined broker and controller; the three
controllers form a static 3-voter KRaft quorum. Topics get three replicas and accept a
write once two of them have it (``min.insync.replicas=2``), so the cluster keeps
accepting ``acks=all`` writes with one node down, and never acknowledges a write only
one node holds.

:class:`LocalKafkaCluster` tells which node leads a topic's partition, SIGKILLs it and
restarts it on the same data and ports. No Docker path: the point is to kill processes.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .kafka import (
    KafkaBrokerError,
    LocalKafka,
    _run_in_fresh_loop,
    new_cluster_id,
)
from .ports import free_port

NODE_COUNT = 3

NODE_HEAP = "-Xmx384m"
"""Per node: three of them share two cores and the memory of other helpers' JVMs."""

CLUSTER_SETTINGS: dict[str, str] = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    # Consumer offsets and producer state must survive the loss of any one node too:
    # a consumer whose group coordinator sits on the killed node must carry on.
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "unclean.leader.election.enable": "false",
    # A SIGKILLed leader is replaced once its session expires, and the node restarted
    # after it may only register again then: shorter than the single broker's 4 s, still
    # six heartbeats, so a node slowed by a loaded machine is not fenced for nothing.
    "broker.session.timeout.ms": "3000",
    "num.replica.fetchers": "1",
}


@dataclass(frozen=True)
class PartitionState:
    """One partition as the cluster's metadata describes it."""

    topic: str
    partition: int
    leader: int
    """Node id of the leader, -1 while there is none."""
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class ClusterNode(LocalKafka):
    """One node of :class:`LocalKafkaCluster`: a :class:`LocalKafka` whose node id and
    KRaft quorum come from the cluster instead of a one-node quorum of its own."""

    def __init__(
        self,
        workdir: Path,
        *,
        node_id: int,
        cluster_id: str,
        voters: Callable[[], str],
        java: str = "java",
    ) -> None:
        super().__init__(workdir, java=java)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._voters = voters

    def _server_properties(self) -> str:
        """The single-node properties with this node's identity and the shared quorum.

        Later keys win in a Java properties file, but the one-node quorum setting must go:
        a node may not name both a bootstrap server and a static voter set.
        """
        overrides = {
            "node.id": str(self.node_id),
            "controller.quorum.voters": self._voters(),
            **CLUSTER_SETTINGS,
        }
        dropped = {*overrides, "controller.quorum.bootstrap.servers"}
        kept = [
            line
            for line in super()._server_properties().splitlines()
            if line.partition("=")[0] not in dropped
        ]
        return "".join(f"{line}\n" for line in kept) + "".join(
            f"{key}={value}\n" for key, value in overrides.items()
        )

    def _spawn(self, main_class: str, *args: str, heap: str, log: str) -> subprocess.Popen[bytes]:
        """Start the node with a smaller heap; format its storage for the static voter
        set (``controller.quorum.voters``), which excludes ``--standalone``."""
        if main_class == "kafka.Kafka":
            heap = NODE_HEAP
        if main_class == "kafka.tools.StorageTool":
            args = tuple(arg for arg in args if arg != "--standalone")
        return super()._spawn(main_class, *args, heap=heap, log=log)


class LocalKafkaCluster:
    """Three :class:`ClusterNode` JVMs (ids 1-3) under ``workdir/node-<id>``."""

    restartable = True

    def __init__(self, workdir: Path, *, java: str = "java") -> None:
        self.workdir = workdir
        self.cluster_id = new_cluster_id()
        self.nodes: dict[int, ClusterNode] = {
            node_id: ClusterNode(
                workdir / f"node-{node_id}",
                node_id=node_id,
                cluster_id=self.cluster_id,
                voters=self._voters,
                java=java,
            )
            for node_id in range(1, NODE_COUNT + 1)
        }
        self._check_distinct_ports()

    def _check_distinct_ports(self) -> None:
        """Each node picked free ports on its own; make sure no two picked the same."""
        taken: set[int] = set()
        for node in self.nodes.values():
            ports = [node.port, node.sasl_port, node.controller_port]
            while taken.intersection(ports) or len(set(ports)) < len(ports):
                node.port, node.sasl_port, node.controller_port = ports = [
                    free_port() for _ in range(3)
                ]
            node.bootstrap = f"127.0.0.1:{node.port}"
            node.sasl_bootstrap = f"127.0.0.1:{node.sasl_port}"
            taken.update(ports)

    def _voters(self) -> str:
        return ",".join(
            f"{node_id}@127.0.0.1:{node.controller_port}" for node_id, node in self.nodes.items()
        )

    @property
    def bootstrap(self) -> str:
        """Every node's PLAINTEXT address: a client reaches the cluster through any of them."""
        return ",".join(node.bootstrap for node in self.nodes.values())

    # ------------------------------------------------------------------------- lifecycle

    def start(self, timeout_s: float = 150.0) -> None:
        """Start every node that is not running, in parallel: a node only serves once a
        majority of the quorum is up, so starting them one after another would stall."""
        stopped = [node for node in self.nodes.values() if not node.running]
        if not stopped:
            return
        with ThreadPoolExecutor(len(stopped), thread_name_prefix="kafka-node") as pool:
            futures = [pool.submit(node.start, timeout_s) for node in stopped]
            errors = [f.exception() for f in futures]
        failures = [e for e in errors if e is not None]
        if failures:
            self.kill()
            raise KafkaBrokerError(
                "the Kafka cluster did not start:\n" + "\n".join(str(e) for e in failures)
            ) from failures[0]

    def stop(self, timeout_s: float = 30.0) -> None:
        for node in self.nodes.values():
            node.stop(timeout_s)

    def kill(self) -> None:
        for node in self.nodes.values():
            node.kill()

    def close(self) -> None:
        """Kill every node and delete the cluster's files. Not a clean stop: a node
        shutting down cleanly waits for the quorum the other nodes just left."""
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node: the broker and its controller vanish without a goodbye."""
        self.nodes[node_id].kill()

    def restart_node(self, node_id: int, timeout_s: float = 120.0) -> None:
        """Start a killed node again on its data and ports, and wait until it serves."""
        self.nodes[node_id].start(timeout_s)

    # -------------------------------------------------------------------------- metadata

    def _live_bootstrap(self) -> str:
        for node in self.nodes.values():
            if node.running:
                return node.bootstrap
        raise KafkaBrokerError("no node of the Kafka cluster is running")

    def partitions(self, topics: Sequence[str], timeout_s: float = 10.0) -> list[PartitionState]:
        """The partitions of ``topics`` as one live node's metadata describes them."""
        bootstrap = self._live_bootstrap()
        found = _run_in_fresh_loop(
            lambda: _topic_metadata(bootstrap, list(topics), int(timeout_s * 1000)),
            timeout_s + 2.0,
        )
        return found

    def leader_of(self, topic: str, partition: int = 0, timeout_s: float = 30.0) -> int:
        """The node id leading ``topic``'s ``partition``, waiting while there is none."""
        state = self.wait_for(
            topic, partition, lambda s: s.leader in self.nodes, "to have a leader", timeout_s
        )
        return state.leader

    def wait_fully_replicated(
        self, topic: str, partition: int = 0, timeout_s: float = 60.0
    ) -> PartitionState:
        """Wait until every node is in the partition's in-sync replica set, so that
        losing any one node leaves ``min.insync.replicas`` in sync."""
        return self.wait_for(
            topic,
            partition,
            lambda s: len(s.isr) == NODE_COUNT and s.leader in self.nodes,
            f"to have all {NODE_COUNT} replicas in sync",
            timeout_s,
        )

    def wait_for(
        self,
        topic: str,
        partition: int,
        condition: Callable[[PartitionState], bool],
        what: str,
        timeout_s: float,
    ) -> PartitionState:
        """Poll the metadata until ``condition`` holds for the partition."""
        deadline = time.monotonic() + timeout_s
        last: PartitionState | str = "no metadata yet"
        while True:
            try:
                states = self.partitions([topic])
                state = next(
                    (s for s in states if s.partition == partition),
                    None,
                )
                if state is not None:
                    last = state
                    if condition(state):
                        return state
            except Exception as exc:  # a node that just died, a topic not yet known
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= deadline:
                raise KafkaBrokerError(
                    f"{topic}[{partition}] did not come {what} within {timeout_s}s; last: {last}"
                )
            time.sleep(0.2)


async def _topic_metadata(
    bootstrap: str, topics: list[str], request_timeout_ms: int
) -> list[PartitionState]:
    from aiokafka.conn import create_conn
    from aiokafka.protocol.metadata import MetadataRequest

    host, _, port = bootstrap.rpartition(":")
    conn = await create_conn(host, int(port), request_timeout_ms=request_timeout_ms)
    try:
        response = await conn.send(MetadataRequest(topics, allow_auto_topic_creation=False))
    finally:
        await conn.close()
    states: list[PartitionState] = []
    # Fields by position: every response version starts (error, name, ...) for a topic,
    # ends with its partitions, and starts (error, partition, leader, replicas, isr) for
    # a partition.
    for topic_entry in response.topics:
        if topic_entry[0] != 0:
            raise KafkaBrokerError(f"metadata of {topic_entry[1]}: error code {topic_entry[0]}")
        for part in topic_entry[-1]:
            states.append(
                PartitionState(
                    topic=topic_entry[1],
                    partition=part[1],
                    leader=part[2],
                    replicas=tuple(part[3]),
                    isr=tuple(part[4]),
                )
            )
    return states


__all__: Sequence[str] = [
    "CLUSTER_SETTINGS",
    "NODE_COUNT",
    "ClusterNode",
    "LocalKafkaCluster",
    "PartitionState",
]
