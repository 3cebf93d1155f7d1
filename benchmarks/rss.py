"""Peak resident memory of a Spark application's processes, sampled from ``/proc``.

The driver is two processes (this Python interpreter and the JVM it started); Spark's
Python workers are Python processes below the JVM (``pyspark.daemon`` and the workers it
forks), short-lived, so a background thread samples them every ``interval_s``.
"""

from __future__ import annotations

import os
import resource
import threading
from dataclasses import dataclass
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _pss(pid: int) -> int:
    """Proportional set size: shared pages split among their sharers (Spark forks its
    Python workers from one daemon, so their RSS double-counts what they share)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return _rss(pid)


def _is_python(pid: int) -> bool:
    try:
        return b"python" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return False


@dataclass
class Peaks:
    jvm: int = 0
    workers: int = 0
    """The largest sum of the Python workers' proportional sizes at one sample."""
    worker: int = 0
    """The largest single Python worker."""

    def describe(self) -> str:
        mib = 2**20
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return (
            f"driver JVM {self.jvm / mib:,.0f} MiB, driver Python {own / mib:,.0f} MiB, "
            f"Python workers {self.workers / mib:,.0f} MiB together (PSS) "
            f"(largest one {self.worker / mib:,.0f} MiB)"
        )


class RssSampler:
    """Samples the JVM ``jvm_pid`` and the Python processes below it until stopped."""

    def __init__(self, jvm_pid: int, interval_s: float = 0.2) -> None:
        self.jvm_pid = jvm_pid
        self.interval_s = interval_s
        self.peaks = Peaks()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> Peaks:
        self._stop.set()
        self._thread.join()
        return self.peaks

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        peaks = self.peaks
        peaks.jvm = max(peaks.jvm, _rss(self.jvm_pid))
        tree = _children()
        below, pending = [], list(tree.get(self.jvm_pid, []))
        while pending:
            pid = pending.pop()
            below.append(pid)
            pending.extend(tree.get(pid, []))
        python = [pid for pid in below if _is_python(pid)]
        if python:
            peaks.workers = max(peaks.workers, sum(map(_pss, python)))
            peaks.worker = max(peaks.worker, max(map(_rss, python)))
