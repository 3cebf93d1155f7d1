"""Tallied metrics: exposed as prometheus_client exposes the same metric, added up over
the probes of a label set, and kept when a probe's stream is gone."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from msgstream import DeleteMsg, MsgPack
from msgstream.configuration.config import config_from_dict
from msgstream.observability.metrics import TALLIED, PrometheusInstruments
from msgstream.observability.tallies import TallyCollector
from msgstream.streams.factory import new_msgstream

BOUNDS = (0.001, 0.01, 0.1, 1.0)
VALUES = (0.0, 0.001, 0.0010001, 0.05, 0.1, 0.5, 1.0, 7.0, 1e9)
"""Values on, just past and between the bounds, and past the last."""


class Owner:
    """Stands for a probe: the tallies live as long as it does."""


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for metric in registry.collect()
        for s in metric.samples
        if not s.name.endswith("_created")
    }


def test_a_histogram_reads_as_prometheus_clients_own() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    tallies = TallyCollector()
    tallies.histogram("t_seconds", "help", ["channel"], BOUNDS)
    ours.register(tallies)
    owner = Owner()
    timings = tallies.tally("t_seconds", owner, "a")
    reference = Histogram("t_seconds", "help", ["channel"], buckets=BOUNDS, registry=theirs)
    for value in VALUES:
        timings.observe(value)
        reference.labels("a").observe(value)
    assert samples(ours) == samples(theirs)
    assert samples(ours)[("t_seconds_bucket", (("channel", "a"), ("le", "0.001")))] == 2
    assert samples(ours)[("t_seconds_count", (("channel", "a"),))] == len(VALUES)


def test_counters_read_as_prometheus_clients_own() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    tallies = TallyCollector()
    tallies.counter("n_bytes_total", "help", ["channel"])
    tallies.by_type("n_messages_total", "help", ["channel", "msg_type"])
    ours.register(tallies)
    owner = Owner()
    nbytes = tallies.tally("n_bytes_total", owner, "a")
    messages = tallies.tally("n_messages_total", owner, "a")
    ref_bytes = Counter("n_bytes", "help", ["channel"], registry=theirs)
    ref_messages = Counter("n_messages", "help", ["channel", "msg_type"], registry=theirs)
    for count, label in ((3, "Insert"), (1, "TimeTick"), (2, "Insert")):
        nbytes.inc(100 * count)
        messages.add({label: count})
        ref_bytes.labels("a").inc(100 * count)
        ref_messages.labels("a", label).inc(count)
    assert samples(ours) == samples(theirs)
    assert b'n_messages_total{channel="a",msg_type="Insert"} 5.0' in generate_latest(ours)


def test_a_label_set_adds_its_probes_up_and_keeps_a_gone_ones_counts() -> None:
    registry = CollectorRegistry()
    tallies = TallyCollector()
    tallies.counter("n_total", "help", ["channel"])
    registry.register(tallies)
    first, second, other = Owner(), Owner(), Owner()
    tallies.tally("n_total", first, "a").inc(2)
    tallies.tally("n_total", second, "a").inc(3)
    tallies.tally("n_total", other, "b").inc(7)
    assert samples(registry) == {
        ("n_total", (("channel", "a"),)): 5,
        ("n_total", (("channel", "b"),)): 7,
    }
    del first, other
    gc.collect()
    assert samples(registry) == {
        ("n_total", (("channel", "a"),)): 5,
        ("n_total", (("channel", "b"),)): 7,
    }
    family = tallies._families["n_total"]
    assert [len(cells) for cells in family.live.values()] == [1]  # only the second's is held


def test_a_name_is_declared_once() -> None:
    tallies = TallyCollector()
    tallies.counter("n_total", "help", ["channel"])
    with pytest.raises(ValueError, match="'n_total' is declared twice"):
        tallies.by_type("n_total", "help", ["channel", "msg_type"])


def test_a_scrape_beside_the_writer_sees_whole_histograms() -> None:
    """A scrape from another thread while a histogram is written: every scrape's count
    is its +Inf bucket, and the last one sees everything."""
    registry = CollectorRegistry()
    tallies = TallyCollector()
    tallies.histogram("t_seconds", "help", ["channel"], BOUNDS)
    registry.register(tallies)
    owner = Owner()
    timings = tallies.tally("t_seconds", owner, "a")
    stop = threading.Event()
    seen: list[tuple[float, float]] = []

    def scrape() -> None:
        while not stop.is_set():
            got = samples(registry)
            seen.append(
                (
                    got[("t_seconds_count", (("channel", "a"),))],
                    got[("t_seconds_bucket", (("channel", "a"), ("le", "+Inf")))],
                )
            )

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        for i in range(200_000):
            timings.observe(VALUES[i % len(VALUES)])
    finally:
        stop.set()
        scraper.join()
    assert all(count == inf for count, inf in seen)
    assert samples(registry)[("t_seconds_count", (("channel", "a"),))] == 200_000


async def test_a_closed_streams_counts_stay(tmp_path: Path) -> None:
    """Produce on two streams of the same channel, close both and let them go: the
    counters still hold every message, and no probe's tallies are held any more."""
    registry = CollectorRegistry()
    instruments = PrometheusInstruments(registry)
    config = config_from_dict({"mq": {"type": "memory"}, "memory": {"name": str(tmp_path)}}, env={})
    for first in (0, 10):
        async with new_msgstream(config, instruments=instruments) as stream:
            await stream.as_producer(["a"])
            for i in range(first, first + 10):
                msg = DeleteMsg(
                    msg_id=i, timestamp=i + 1, collection_name="c", primary_keys=[i], hash_keys=[0]
                )
                await stream.produce(MsgPack(msgs=[msg]))
        del stream
    gc.collect()
    got = samples(registry)
    labels = (("backend", "memory"), ("channel", "a"))
    assert got[("msgstream_produced_messages_total", (*labels, ("msg_type", "Delete")))] == 20
    assert got[("msgstream_send_duration_seconds_count", labels)] == 20
    assert got[("msgstream_produce_duration_seconds_count", (("backend", "memory"),))] == 20
    assert all(not instruments._tallies._families[name].live for name in TALLIED)
