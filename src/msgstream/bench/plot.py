"""``msgstream bench plot``: charts of runs from their ``--json`` files.

Three charts, every run of every file overlaid: the latency percentile distribution on
HdrHistogram's axis (x is ``1/(1-q)`` on a log scale, so 90 %, 99 %, 99.9 %... are evenly
spaced), latency (p50, p99, max) over time and throughput over time. ``.png`` is drawn
with matplotlib; ``.html`` is one self-contained page (the charts as inline SVG, the
figures as a table; no script, no external link), so it works offline. Needs the
``bench`` extra (``pip install 'msgstream[bench]'``).
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cli.common import CliError
from .recorder import decode_histogram, percentile_distribution
from .report import SCHEMA_VERSION, describe_machine

MAX_X = 1e6
"""Where the distribution's x axis ends: 99.9999 %."""


def _matplotlib() -> Any:
    try:
        import matplotlib
    except ModuleNotFoundError as exc:
        raise CliError(
            f"msgstream bench plot needs pip install 'msgstream[bench]' ({exc})"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def load_runs(paths: Sequence[str]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(label, run, document) of every run in the files; labels name the file when there
    are several files."""
    found: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for path in paths:
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"cannot read {path}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise CliError(f"{path} is not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
            raise CliError(f"{path} is not a msgstream bench --json file (schema version 1)")
        for run in doc.get("runs", []):
            label = str(run.get("name"))
            if run.get("backend") and run.get("backend") not in label:
                label += f" ({run['backend']})"
            if len(paths) > 1:
                label = f"{Path(path).stem}: {label}"
            found.append((label, run, doc))
    if not found:
        raise CliError("no runs in the given files")
    return found


def _distribution(run: dict[str, Any]) -> tuple[list[float], list[float]]:
    histogram = decode_histogram(run["histogram"])
    xs: list[float] = []
    ys: list[float] = []
    if histogram.get_total_count() == 0:
        return xs, ys
    for percentile, value_ms in percentile_distribution(histogram):
        x = MAX_X if percentile >= 100.0 else min(MAX_X, 1.0 / (1.0 - percentile / 100.0))
        xs.append(x)
        ys.append(max(value_ms, 0.001))
    return xs, ys


def draw(runs: list[tuple[str, dict[str, Any], dict[str, Any]]], title: str | None) -> Any:
    """The figure: distribution on top, latency and throughput over time below."""
    plt = _matplotlib()
    fig = plt.figure(figsize=(11, 9.5), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[1.25, 1])
    dist = fig.add_subplot(grid[0, :])
    over_time = fig.add_subplot(grid[1, 0])
    rate = fig.add_subplot(grid[1, 1])
    for index, (label, run, _) in enumerate(runs):
        color = f"C{index % 10}"
        xs, ys = _distribution(run)
        dist.plot(xs, ys, label=label, color=color, linewidth=1.6)
        intervals = run.get("intervals", [])
        starts = [i["start_s"] for i in intervals]
        over_time.plot(starts, [i["p99_ms"] for i in intervals], color=color, marker=".",
                       linewidth=1.2, label=f"{label} p99")  # fmt: skip
        over_time.plot(starts, [i["p50_ms"] for i in intervals], color=color, linestyle="--",
                       linewidth=1.0, label=f"{label} p50")  # fmt: skip
        over_time.plot(starts, [i["max_ms"] for i in intervals], color=color, linestyle=":",
                       linewidth=0.8)  # fmt: skip
        rate.plot(starts, [i["msgs_per_s"] for i in intervals], color=color, marker=".",
                  linewidth=1.2, label=label)  # fmt: skip
    dist.set_xscale("log")
    dist.set_yscale("log")
    ticks = [1, 2, 10, 100, 1000, 10_000, 100_000, MAX_X]
    dist.set_xticks(ticks, ["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%", "max"])
    dist.set_xlim(1, MAX_X)
    dist.set_xlabel("percentile (HdrHistogram's 1/(1-q) axis)")
    dist.set_ylabel("latency (ms, log)")
    dist.grid(True, which="major", alpha=0.4)
    dist.legend(loc="upper left", fontsize=9)
    doc = runs[0][2]
    workload = doc.get("workload") or {}
    subtitle = ""
    if workload:
        subtitle = (
            f"{doc.get('message_bytes')} B messages, {workload.get('mode')}"
            + (f" at {workload['rate']} msgs/s" if workload.get("rate") != "max" else "")
            + f", {workload.get('channels')} channel(s), {workload.get('producers')} "
            f"producer(s), pack {workload.get('pack_size')}"
        )
    dist.set_title(
        (title or "msgstream bench: latency by percentile") + (f"\n{subtitle}" if subtitle else ""),
        fontsize=11,
    )
    over_time.set_yscale("log")
    over_time.set_xlabel("seconds into the measurement")
    over_time.set_ylabel("latency per interval (ms): p99, p50 --, max ..")
    over_time.grid(True, alpha=0.4)
    over_time.legend(fontsize=7)
    rate.set_xlabel("seconds into the measurement")
    rate.set_ylabel("msgs/s per interval")
    rate.grid(True, alpha=0.4)
    rate.set_ylim(bottom=0)
    rate.legend(fontsize=7)
    machine = doc.get("machine")
    if machine:
        fig.text(0.01, 0.002, describe_machine(machine), fontsize=7, color="0.4")
    return fig


def _html(
    runs: list[tuple[str, dict[str, Any], dict[str, Any]]], svg: str, title: str | None
) -> str:
    heading = html.escape(title or "msgstream bench")
    head = ["run", "msgs", "errors", "msgs/s", "MB/s", "p50", "p90", "p99", "p99.9",
            "p99.99", "max (ms)"]  # fmt: skip
    rows = []
    for label, run, _ in runs:
        latency = run["latency"]
        pct = latency["percentiles_ms"]
        cells = [
            label, f"{run['sent']:,}", f"{run['errors']:,}", f"{run['msgs_per_s']:,.0f}",
            f"{run['mb_per_s']:.2f}", *(f"{pct[k]:.3f}" for k in
            ("p50", "p90", "p99", "p99.9", "p99.99")), f"{latency['max_ms']:.3f}",
        ]  # fmt: skip
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    summaries = "".join(
        f"<li><b>{html.escape(label)}</b>: <code>{html.escape(run.get('summary', ''))}</code></li>"
        for label, run, _ in runs
    )
    machine = runs[0][2].get("machine")
    where = html.escape(describe_machine(machine)) if machine else ""
    table = (
        "<table><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join(rows)
        + "</table>"
    )
    style = (
        "body{font-family:sans-serif;margin:2em;color:#222}"
        "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 8px;"
        "text-align:right}td:first-child{text-align:left}svg{max-width:100%;height:auto}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{heading}</title><style>{style}</style></head><body>"
        f"<h1>{heading}</h1><p>{where}</p>{table}<ul>{summaries}</ul>"
        f"<figure>{svg}</figure></body></html>\n"
    )


def plot_files(paths: Sequence[str], out: str, *, title: str | None = None) -> None:
    """Chart the runs of the ``--json`` files ``paths`` into ``out`` (.png or .html)."""
    suffix = Path(out).suffix.lower()
    if suffix not in (".png", ".html", ".htm"):
        raise CliError(f"-o {out}: give a .png or .html file")
    runs = load_runs(paths)
    plt = _matplotlib()
    fig = draw(runs, title)
    try:
        if suffix == ".png":
            fig.savefig(out, dpi=110)
        else:
            buffer = io.StringIO()
            fig.savefig(buffer, format="svg")
            svg = buffer.getvalue()
            svg = svg[svg.index("<svg") :]  # drop the XML prolog and DOCTYPE
            Path(out).write_text(_html(runs, svg, title), encoding="utf-8")
    except OSError as exc:
        raise CliError(f"-o {out}: cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
