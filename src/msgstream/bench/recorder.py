"""Latencies in HDR histograms (the ``hdrhistogram`` package), per run and per interval.

Values are recorded in nanoseconds, from 1 ns to one hour, to three significant digits
(HdrHistogram's usual setting: any value is within 0.1 % of what was recorded). The
recorder keeps one histogram per reporting interval (a second by default) and the sum of
them for the whole run; each closed interval is kept encoded (HdrHistogram's compressed
base64 form, a few hundred bytes), which is what ``--hdr-log`` writes and the JSON
carries.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogWriter

LOWEST_NS = 1
HIGHEST_NS = 3_600_000_000_000
SIGNIFICANT_DIGITS = 3
PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9, 99.99)
"""The percentiles every report computes (tables show all but p95; plus max)."""


def new_histogram() -> Any:
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)


def add_into(total: Any, other: Any) -> None:
    """Add histogram ``other`` to ``total``. An empty ``other`` is skipped: hdrh's ``add``
    takes an empty histogram's minimum as 0, which would make ``total``'s minimum 0."""
    if other.get_total_count():
        total.add(other)


def decode_histogram(encoded: str | bytes) -> Any:
    """A histogram from its encoded form (as the JSON and the interval log carry it)."""
    return HdrHistogram.decode(encoded.encode() if isinstance(encoded, str) else encoded)


def percentile_key(q: float) -> str:
    """``50.0 -> "p50"``, ``99.9 -> "p99.9"``."""
    return "p" + f"{q:g}"


@dataclass(frozen=True)
class Stats:
    """The figures of one histogram, latencies in milliseconds."""

    count: int
    mean_ms: float
    min_ms: float
    max_ms: float
    percentiles_ms: dict[str, float]

    @classmethod
    def of(
        cls,
        histogram: Any,
        percentiles: Sequence[float] = PERCENTILES,
        *,
        total_ns: float | None = None,
    ) -> Stats:
        """The figures of ``histogram``; give the recorded values' sum as ``total_ns`` when
        it is known. Both matter while a run is measuring, since this runs on its event
        loop once an interval: the percentiles are read in one pass over the counts, and
        the histogram's own mean walks every bucket in Python (a stall of every send in
        flight; docs/benchmarks/harness.md)."""
        count = int(histogram.get_total_count())
        if count == 0:
            return cls(0, 0.0, 0.0, 0.0, {percentile_key(q): 0.0 for q in percentiles})
        mean_ns = histogram.get_mean_value() if total_ns is None else total_ns / count
        values = histogram.get_percentile_to_value_dict(list(percentiles))
        return cls(
            count=count,
            mean_ms=mean_ns / 1e6,
            min_ms=histogram.get_min_value() / 1e6,
            max_ms=histogram.get_max_value() / 1e6,
            percentiles_ms={percentile_key(q): values[q] / 1e6 for q in percentiles},
        )

    def ms(self, q: float) -> float:
        return self.percentiles_ms[percentile_key(q)]

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "mean_ms": round(self.mean_ms, 6),
            "min_ms": round(self.min_ms, 6),
            "max_ms": round(self.max_ms, 6),
            "percentiles_ms": {k: round(v, 6) for k, v in self.percentiles_ms.items()},
        }


@dataclass(frozen=True)
class Interval:
    """One closed reporting interval of a run."""

    start_s: float
    """Seconds since the measurement started."""
    end_s: float
    sent: int
    errors: int
    bytes: int
    stats: Stats
    histogram: str
    """The interval's histogram, encoded."""

    @property
    def msgs_per_s(self) -> float:
        return self.sent / max(self.end_s - self.start_s, 1e-9)

    def to_json(self) -> dict[str, Any]:
        return {
            "start_s": round(self.start_s, 6),
            "end_s": round(self.end_s, 6),
            "sent": self.sent,
            "errors": self.errors,
            "bytes": self.bytes,
            "msgs_per_s": round(self.msgs_per_s, 3),
            "p50_ms": round(self.stats.ms(50.0), 6),
            "p99_ms": round(self.stats.ms(99.0), 6),
            "max_ms": round(self.stats.max_ms, 6),
            "histogram": self.histogram,
        }


@dataclass(slots=True)
class Tally:
    """The counts of one interval: messages, failed messages, payload bytes, and the sum
    of the latencies recorded (an exact mean)."""

    sent: int = 0
    errors: int = 0
    bytes: int = 0
    total_ns: int = 0


@dataclass
class Recorder:
    """Records the latency of each acknowledged message, the errors and the bytes sent.

    Latencies go into the current interval's histogram; :meth:`roll` closes the interval
    (normally once a second, from the runner's ticker) and adds it to the run's total.
    """

    started_ns: int = field(default_factory=time.perf_counter_ns)
    started_epoch_s: float = field(default_factory=time.time)
    total: Any = field(default_factory=new_histogram)
    intervals: list[Interval] = field(default_factory=list)
    sent: int = 0
    errors: int = 0
    bytes: int = 0
    schedule_lag: Any = field(default_factory=new_histogram)
    """How late the scheduler started sends after their intended time while it was not
    held up by an earlier send (event-loop timers, a busy loop): the harness's own share."""
    _current: Any = field(default_factory=new_histogram)
    _interval_start_ns: int = 0
    _interval: Tally = field(default_factory=lambda: Tally())
    """What the current interval has counted."""
    total_ns: int = 0
    """The sum of every latency recorded (the mean without walking the histogram)."""
    _error_kinds: dict[str, int] = field(default_factory=dict)
    ended_ns: int | None = None

    def __post_init__(self) -> None:
        self._interval_start_ns = self.started_ns

    def record(self, latency_ns: int, count: int = 1, nbytes: int = 0) -> None:
        """``count`` messages acknowledged ``latency_ns`` after they were due."""
        value = min(max(latency_ns, LOWEST_NS), HIGHEST_NS)
        self._current.record_value(value, count)
        tally = self._interval
        tally.total_ns += value * count
        tally.sent += count
        tally.bytes += nbytes

    def record_error(self, exc: BaseException, count: int = 1) -> None:
        """``count`` messages whose send failed: counted (by exception type), never timed."""
        self._interval.errors += count
        kind = type(exc).__name__
        self._error_kinds[kind] = self._error_kinds.get(kind, 0) + count

    def record_lag(self, lag_ns: int) -> None:
        self.schedule_lag.record_value(min(max(lag_ns, LOWEST_NS), HIGHEST_NS))

    @property
    def error_kinds(self) -> dict[str, int]:
        return dict(self._error_kinds)

    def elapsed_s(self, now_ns: int | None = None) -> float:
        end = self.ended_ns if now_ns is None and self.ended_ns is not None else now_ns
        return ((end or time.perf_counter_ns()) - self.started_ns) / 1e9

    def roll(self, now_ns: int | None = None, *, merge_below_s: float = 0.0) -> Interval:
        """Close the current interval at ``now_ns`` (default: now) and start the next. An
        interval shorter than ``merge_below_s`` that directly follows the previous one is
        merged into it (the stub at the end of a slice)."""
        now = time.perf_counter_ns() if now_ns is None else now_ns
        current = self._current
        start_s = (self._interval_start_ns - self.started_ns) / 1e9
        end_s = (now - self.started_ns) / 1e9
        tally = self._interval
        sent, errors, nbytes, total_ns = (
            tally.sent,
            tally.errors,
            tally.bytes,
            float(tally.total_ns),
        )
        merged = new_histogram()
        add_into(merged, current)
        previous = self.intervals[-1] if self.intervals else None
        if (
            previous is not None
            and end_s - start_s < merge_below_s
            and abs(previous.end_s - start_s) < 1e-6
        ):
            self.intervals.pop()
            add_into(merged, decode_histogram(previous.histogram))
            total_ns += previous.stats.mean_ms * 1e6 * previous.stats.count
            start_s = previous.start_s
            sent, errors, nbytes = (
                sent + previous.sent, errors + previous.errors, nbytes + previous.bytes
            )  # fmt: skip
        interval = Interval(
            start_s=start_s,
            end_s=end_s,
            sent=sent,
            errors=errors,
            bytes=nbytes,
            stats=Stats.of(merged, total_ns=total_ns),
            histogram=merged.encode().decode("ascii"),
        )
        add_into(self.total, current)
        self.sent += tally.sent
        self.errors += tally.errors
        self.bytes += tally.bytes
        self.total_ns += tally.total_ns
        self._interval = Tally()
        current.reset()
        self._interval_start_ns = now
        self.intervals.append(interval)
        return interval

    def finish(self, now_ns: int | None = None) -> None:
        """Close the last interval: the run's figures are final."""
        now = time.perf_counter_ns() if now_ns is None else now_ns
        if self.ended_ns is None:
            last = self.roll(now)
            if last.sent == 0 and last.errors == 0 and len(self.intervals) > 1:
                self.intervals.pop()
            self.ended_ns = now

    def running_stats(self) -> tuple[int, Stats]:
        """(messages so far, the figures so far) without closing the interval."""
        merged = new_histogram()
        add_into(merged, self.total)
        add_into(merged, self._current)
        total_ns = self.total_ns + self._interval.total_ns
        return self.sent + self._interval.sent, Stats.of(merged, total_ns=total_ns)

    @property
    def errors_so_far(self) -> int:
        """Errors counted, the current interval's included."""
        return self.errors + self._interval.errors

    def stats(self) -> Stats:
        return Stats.of(self.total, total_ns=self.total_ns)

    def write_interval_log(self, out: IO[str], tag: str | None = None) -> None:
        """The run's intervals in HdrHistogram's interval log format (v1.2), values in
        nanoseconds; the max column in milliseconds."""
        write_interval_log(out, [(tag, self.started_epoch_s, self.intervals)])


def write_interval_log(
    out: IO[str], runs: Sequence[tuple[str | None, float, Sequence[Interval]]]
) -> None:
    """Several runs' intervals in one HdrHistogram interval log; each run's lines carry
    its tag (``Tag=NAME,``) when there are several. Times are relative to the first run's
    start (``#[StartTime: …]``)."""
    writer = HistogramLogWriter(out)
    writer.output_log_format_version()
    writer.output_comment("[msgstream bench: latency in nanoseconds; Interval_Max in milliseconds]")
    base = min((start for _, start, _ in runs), default=time.time())
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(base))
    writer.output_comment(f"[StartTime: {base:.3f} (seconds since epoch), {stamp}]")
    writer.output_legend()
    lines: list[tuple[float, str]] = []
    for tag, start_epoch, intervals in runs:
        offset = start_epoch - base
        for interval in intervals:
            prefix = f"Tag={tag}," if tag and len(runs) > 1 else ""
            length = interval.end_s - interval.start_s
            max_ms = interval.stats.max_ms
            line = (
                f"{prefix}{interval.start_s + offset:.3f},{length:.3f},{max_ms:.3f},"
                f"{interval.histogram}\n"
            )
            lines.append((interval.start_s + offset, line))
    for _, line in sorted(lines, key=lambda item: item[0]):
        out.write(line)


def percentile_distribution(
    histogram: Any, ticks_per_half_distance: int = 5
) -> Iterator[tuple[float, float]]:
    """(percentile 0..100, latency ms) points of HdrHistogram's percentile distribution
    (what its ``.hgrm`` output and plotter show)."""
    for step in histogram.get_percentile_iterator(ticks_per_half_distance):
        yield step.percentile_level_iterated_to, step.value_iterated_to / 1e6
