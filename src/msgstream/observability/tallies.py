"""Counters and histograms for the per-call paths, added up when Prometheus scrapes.

``prometheus_client`` takes a lock for every update of a value, and a produce of one
message made four such updates (two latency histograms, the messages and the bytes).
The metrics a produce or a read updates on every call are kept here instead, as plain
numbers in *tallies*: each probe owns its tallies, and only its stream's thread writes
them, so an update is an addition with no lock and no call into the library. A
:class:`TallyCollector`, registered in the Prometheus registry, adds the tallies of each
label set up when the registry is collected (a scrape), and exposes them as the counters
and histograms ``prometheus_client`` would.

A probe's tallies outlive it: when the probe is garbage collected, its tallies are
folded into its label set's retired total, so a counter never goes down and a stream
that was closed costs no memory. A scrape that runs while a stream updates a histogram
may see the sum one observation ahead of or behind the buckets; the count is always
the buckets' total, as Prometheus requires.
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["Tally", "TallyCollector", "Timings", "TypeTally"]

Labels = tuple[str, ...]


class Tally:
    """A counter's value for one probe."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def fold(self, other: Tally) -> None:
        self.value += other.value


class TypeTally:
    """A counter with a ``msg_type`` label for one probe: its value per type label."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, types: Mapping[str, int]) -> None:
        counts = self.counts
        for label, count in types.items():
            counts[label] = counts.get(label, 0) + count

    def fold(self, other: TypeTally) -> None:
        self.add(dict(other.counts))  # a copy: the owner's thread may add a type meanwhile


class Timings:
    """A histogram for one probe: how many observations fell in each bucket, and their
    sum. ``bounds`` are the buckets' upper bounds (inclusive), ascending, without +Inf."""

    __slots__ = ("bounds", "buckets", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.buckets = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.buckets[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def fold(self, other: Timings) -> None:
        for i, count in enumerate(list(other.buckets)):
            self.buckets[i] += count
        self.sum += other.sum


_Cell = Tally | TypeTally | Timings


class _Family:
    """One metric's tallies: the live ones of each label set, and the retired total of
    the ones whose probes are gone."""

    def __init__(
        self,
        name: str,
        kind: str,
        help_text: str,
        labels: Sequence[str],
        bounds: Sequence[float] = (),
    ) -> None:
        self.name = name
        self.kind = kind
        self.help = help_text
        self.labels = list(labels)
        self.bounds = tuple(bounds)
        """A histogram's bucket bounds (+Inf left out)."""
        self.live: dict[Labels, list[_Cell]] = {}
        self.retired: dict[Labels, _Cell] = {}


class TallyCollector:
    """The Prometheus collector of a set of tallied metrics.

    :meth:`counter`, :meth:`by_type` and :meth:`histogram` declare a metric; a probe asks
    for its tally with :meth:`tally`, passing itself as the owner whose life the tally's
    registration follows. Thread-safe: tallies are made, retired and collected under one
    lock; updating one takes none (its owner's thread alone writes it).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: dict[str, _Family] = {}

    def counter(self, name: str, help_text: str, labels: Sequence[str]) -> None:
        """Declare a counter (``name`` ends in ``_total``, as its samples do)."""
        self._declare(_Family(name, "counter", help_text, labels))

    def by_type(self, name: str, help_text: str, labels: Sequence[str]) -> None:
        """Declare a counter whose last label (``msg_type``) its tallies count by."""
        self._declare(_Family(name, "by_type", help_text, labels))

    def histogram(
        self, name: str, help_text: str, labels: Sequence[str], bounds: Sequence[float]
    ) -> None:
        """Declare a histogram with buckets ``bounds`` (+Inf is added)."""
        self._declare(_Family(name, "histogram", help_text, labels, bounds))

    def _declare(self, family: _Family) -> None:
        if family.name in self._families:
            raise ValueError(f"metric {family.name!r} is declared twice")
        self._families[family.name] = family

    def tally(self, name: str, owner: object, *labels: str) -> Any:
        """A new tally of metric ``name`` for ``labels`` (a :class:`Tally`,
        :class:`TypeTally` or :class:`Timings`, as the metric was declared), counted
        until ``owner`` is garbage collected and in the retired total after."""
        family = self._families[name]
        cell = self._new_cell(family)
        with self._lock:
            family.live.setdefault(labels, []).append(cell)
        weakref.finalize(owner, self._retire, family, labels, cell).atexit = False
        return cell

    def _new_cell(self, family: _Family) -> _Cell:
        if family.kind == "counter":
            return Tally()
        if family.kind == "by_type":
            return TypeTally()
        return Timings(family.bounds)

    def _retire(self, family: _Family, labels: Labels, cell: _Cell) -> None:
        with self._lock:
            cells = family.live[labels]
            cells.remove(cell)
            if not cells:
                del family.live[labels]
            total = family.retired.get(labels)
            if total is None:
                total = family.retired[labels] = self._new_cell(family)
            total.fold(cell)  # type: ignore[arg-type]  # the same kind: one family's cells

    def _totals(self, family: _Family) -> dict[Labels, _Cell]:
        """Each label set's total over its live and retired tallies (a snapshot)."""
        with self._lock:
            parts = {labels: list(cells) for labels, cells in family.live.items()}
            for labels, cell in family.retired.items():
                parts.setdefault(labels, []).append(cell)
        totals: dict[Labels, _Cell] = {}
        for labels, cells in parts.items():
            total = totals[labels] = self._new_cell(family)
            for cell in cells:
                total.fold(cell)  # type: ignore[arg-type]
        return totals

    # --- the collector protocol -------------------------------------------------------

    def describe(self) -> Iterator[Any]:
        """The metrics collected, without samples (the registry checks names with it)."""
        for family in self._families.values():
            yield self._metric(family)

    def collect(self) -> Iterator[Any]:
        for family in self._families.values():
            metric = self._metric(family)
            for labels, total in sorted(self._totals(family).items()):
                self._add_samples(metric, labels, total)
            yield metric

    def _metric(self, family: _Family) -> Any:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        if family.kind == "histogram":
            return HistogramMetricFamily(family.name, family.help, labels=family.labels)
        return CounterMetricFamily(family.name, family.help, labels=family.labels)

    def _add_samples(self, metric: Any, labels: Labels, total: _Cell) -> None:
        from prometheus_client.utils import floatToGoString

        if isinstance(total, Tally):
            metric.add_metric(list(labels), total.value)
        elif isinstance(total, TypeTally):
            for label, count in sorted(total.counts.items()):
                metric.add_metric([*labels, label], count)
        else:
            cumulative, running = [], 0
            for bound, count in zip((*total.bounds, float("inf")), total.buckets, strict=True):
                running += count
                le = floatToGoString(bound)  # type: ignore[no-untyped-call]  # as the library's
                cumulative.append((le, running))
            metric.add_metric(list(labels), cumulative, total.sum)
