"""What a benchmark run reports: the summary line, the table, the JSON document.

The JSON document's layout is the JSON Schema shipped beside this module
(``bench-run.schema.json``, :data:`SCHEMA_ID`; :func:`schema` loads it). A change that
removes or renames a field changes :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Sequence
from importlib import resources
from typing import Any

from rich.table import Table

from .recorder import Stats, percentile_key
from .runner import Side
from .workload import Workload

SCHEMA_VERSION = 1
SCHEMA_ID = "https://msgstream.invalid/schemas/bench-run-1.schema.json"
"""The ``$id`` of the JSON Schema (an identifier, not a download address)."""
TABLE_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0, 99.9, 99.99)


def schema() -> dict[str, Any]:
    """The JSON Schema of the ``--json`` document."""
    text = resources.files(__package__).joinpath("bench-run.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def machine() -> dict[str, Any]:
    """The CPU model, cores, memory, OS and Python of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        memory = 0.0
    return {
        "cpu": cpu,
        "cores": os.cpu_count() or 0,
        "memory_gib": round(memory, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def describe_machine(info: dict[str, Any]) -> str:
    return (
        f"{info['cpu']}, {info['cores']} cores, {info['memory_gib']:.0f} GiB, {info['os']}, "
        f"Python {info['python']}"
    )


def summary_line(side: Side) -> str:
    """``kafka-producer-perf-test``'s last line, for one side (latencies in ms)."""
    stats = side.stats()
    return (
        f"{side.recorder.sent} records sent, {side.msgs_per_s:.1f} records/sec "
        f"({side.mb_per_s:.2f} MB/sec), {stats.mean_ms:.2f} ms avg latency, "
        f"{stats.max_ms:.2f} ms max latency, {stats.ms(50.0):.2f} ms 50th, "
        f"{stats.ms(95.0):.2f} ms 95th, {stats.ms(99.0):.2f} ms 99th, "
        f"{stats.ms(99.9):.2f} ms 99.9th."
    )


def _ms(value: float) -> str:
    return f"{value:,.3f}" if value < 10 else f"{value:,.2f}" if value < 1000 else f"{value:,.0f}"


def ratio(ours: float, base: float) -> float | None:
    return ours / base if base > 0 else None


def table(title: str, sides: Sequence[Side], baseline: Side | None = None) -> Table:
    """One column per side (latencies in ms), and with a baseline one ratio column per
    other side: each figure divided by the baseline's. Open-loop runs add the timer lag:
    how late sends that were not held up started (asyncio's timers, a busy loop)."""
    out = Table(title=title)
    out.add_column("figure", justify="left")
    for side in sides:
        out.add_column(side.name, justify="right")
    others = [s for s in sides if s is not baseline] if baseline is not None else []
    for side in others:
        out.add_column(f"{side.name} / {baseline.name}" if baseline else "", justify="right")
    stats = {id(s): s.stats() for s in sides}

    def row(label: str, value: Any, fmt: Any) -> None:
        cells = [fmt(value(s)) for s in sides]
        if baseline is not None:
            base = value(baseline)
            for side in others:
                r = ratio(value(side), base)
                cells.append("-" if r is None else f"{r:.2f}x")
        out.add_row(label, *cells)

    for q in TABLE_PERCENTILES:
        row(f"p{q:g} (ms)", lambda s, q=q: stats[id(s)].ms(q), _ms)
    row("max (ms)", lambda s: stats[id(s)].max_ms, _ms)
    row("mean (ms)", lambda s: stats[id(s)].mean_ms, _ms)
    row("msgs/s", lambda s: s.msgs_per_s, lambda v: f"{v:,.0f}")
    row("MB/s", lambda s: s.mb_per_s, lambda v: f"{v:,.2f}")
    lags = {id(s): Stats.of(s.recorder.schedule_lag) for s in sides}
    if any(lag.count for lag in lags.values()):  # open loop: the harness's own share
        row("timer lag p50 (ms)", lambda s: lags[id(s)].ms(50.0), _ms)
        row("timer lag p99 (ms)", lambda s: lags[id(s)].ms(99.0), _ms)
    out.add_row("messages", *[f"{s.recorder.sent:,}" for s in sides])
    out.add_row("errors", *[f"{s.recorder.errors:,}" for s in sides])
    return out


def side_to_json(side: Side) -> dict[str, Any]:
    recorder = side.recorder
    return {
        "name": side.name,
        "backend": side.backend,
        "client": side.target.client(),
        "sent": recorder.sent,
        "errors": recorder.errors,
        "error_kinds": recorder.error_kinds,
        "bytes": recorder.bytes,
        "seconds": round(side.measured_s, 6),
        "msgs_per_s": round(side.msgs_per_s, 3),
        "mb_per_s": round(side.mb_per_s, 6),
        "latency": side.stats().to_json(),
        "schedule_lag": Stats.of(recorder.schedule_lag).to_json(),
        "histogram": recorder.total.encode().decode("ascii"),
        "intervals": [interval.to_json() for interval in recorder.intervals],
        "started_epoch_s": round(recorder.started_epoch_s, 3),
        "summary": summary_line(side),
        **side.extra,
    }


def ratios(side: Side, baseline: Side) -> dict[str, float | None]:
    """``side``'s figures divided by ``baseline``'s (latency percentiles, max, msgs/s)."""
    ours, base = side.stats(), baseline.stats()
    out: dict[str, float | None] = {}
    for key, value in ours.percentiles_ms.items():
        r = ratio(value, base.percentiles_ms[key])
        out[key] = None if r is None else round(r, 4)
    r = ratio(ours.max_ms, base.max_ms)
    out["max"] = None if r is None else round(r, 4)
    r = ratio(side.msgs_per_s, baseline.msgs_per_s)
    out["msgs_per_s"] = None if r is None else round(r, 4)
    return out


def document(
    kind: str,
    sides: Sequence[Side],
    workload: Workload | None,
    *,
    baseline: Side | None = None,
    stopped: str = "completed",
    message_bytes: int | None = None,
    brokers: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``--json`` document of a run (see :func:`schema`)."""
    from .. import __version__

    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "stopped": stopped,
        "machine": machine(),
        "library": {"msgstream": __version__},
        "brokers": brokers or {},
        "workload": None if workload is None else workload.to_json(),
        "message_bytes": message_bytes,
        "runs": [side_to_json(side) for side in sides],
        "baseline": None if baseline is None else baseline.name,
        "ratios": {side.name: ratios(side, baseline) for side in sides if side is not baseline}
        if baseline is not None
        else {},
    }
    if extra:
        doc.update(extra)
    return doc


def percentile_names() -> list[str]:
    return [percentile_key(q) for q in TABLE_PERCENTILES]
