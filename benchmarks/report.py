"""What every benchmark prints: figure rows beside their baseline, and the machine."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

import orjson


@dataclass
class Row:
    figure: str
    ours: float
    baseline: float | None
    unit: str
    goal: str

    @property
    def ratio(self) -> float | None:
        return None if self.baseline in (None, 0) else self.ours / self.baseline


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem_gib:.0f} GiB, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def print_table(rows: list[Row], json_path: str | None = None, **extra: str) -> None:
    print(f"machine: {machine()}")
    for key, value in extra.items():
        print(f"{key}: {value}")
    print(f"{'figure':44} {'ours':>12} {'baseline':>12} {'ratio':>7}  unit    goal")
    for row in rows:
        base = "-" if row.baseline is None else f"{row.baseline:,.1f}"
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x"
        print(f"{row.figure:44} {row.ours:>12,.1f} {base:>12} {ratio:>7}  {row.unit:7} {row.goal}")
    if json_path:
        document = {"machine": machine(), **extra, "rows": [r.__dict__ for r in rows]}
        with open(json_path, "wb") as out:
            out.write(orjson.dumps(document))
