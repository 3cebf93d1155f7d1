"""``msgstream bench``: its options (imported for every ``msgstream`` run, so nothing heavy
here; the handler lives in :mod:`msgstream.bench.cli`).

Registered through the ``msgstream.commands`` entry point like ``ingest`` and ``doctor``
rather than in the CLI core: it is a tool beside the core's produce/consume/inspect, with
an extra of its own (``msgstream[bench]`` for ``plot``), and the entry point keeps the
core's parser free of it.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any

from ..cli.command import Command
from ..cli.common import non_negative_int, positive_float, positive_int

_Container = argparse._ActionsContainer


def _opt(parser: _Container, flag: str, metavar: str, help: str, **settings: Any) -> None:
    parser.add_argument(flag, metavar=metavar, help=help, **settings)


def _flag(parser: _Container, flag: str, help: str) -> None:
    parser.add_argument(flag, action="store_true", help=help)


_BACKEND_HELP = (
    "the backend to benchmark (default: the one the configuration selects); with "
    "--address, its broker address (kafka.brokers, pulsar.address) or store (rocksmq.path)"
)


def _add_target(parser: argparse.ArgumentParser, *, many: bool = False) -> None:
    group = parser.add_argument_group("where")
    group.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS,
                       help="YAML configuration file (as for every command)")  # fmt: skip
    if not many:
        _opt(group, "--backend", "NAME", _BACKEND_HELP)
    _opt(
        group, "--address", "ADDR",
        "the broker address of --backend (or NAME=ADDR, repeatable: --address "
        "kafka=localhost:9092)", action="append", default=[],
    )  # fmt: skip
    _opt(
        group, "--set", "KEY=VALUE",
        "a configuration override, repeatable (--set kafka.acks=1 --set "
        "pulsar.admin_url=http://localhost:8080)", action="append", default=[], dest="overrides",
    )  # fmt: skip
    _flag(group, "--keep-channels", "do not delete the run's channels afterwards")


def _add_output(parser: argparse.ArgumentParser, *, progress: bool = True) -> None:
    group = parser.add_argument_group("output")
    if progress:
        _flag(
            group, "--progress",
            "print the figures so far (messages, rate, p99, errors) as one line per "
            "interval on stderr, for logs and scripts, instead of a terminal's live display",
        )  # fmt: skip
    _opt(group, "--json", "FILE", "write every figure to FILE (see the JSON schema)",
               dest="json_file")  # fmt: skip
    _opt(group, "--hdr-log", "FILE",
               "write the latency histograms in HdrHistogram's interval log format")  # fmt: skip
    _opt(group, "--interval", "SECONDS",
               "length of the intervals of the progress display, log and charts (default 1)",
               type=positive_float, default=1.0)  # fmt: skip


def _add_workload(
    parser: argparse.ArgumentParser, *, channels: bool = True, prebuilt: bool = True
) -> None:
    group = parser.add_argument_group("workload")
    size = group.add_mutually_exclusive_group()
    _opt(size, "--size", "BYTES", "encoded bytes per message (default 1024)",
               type=positive_int, default=1024)  # fmt: skip
    _opt(size, "--payload-file", "F", "send the bytes of F in every message")
    if channels:
        _opt(group, "--channels", "N", "channels (default 1)", type=positive_int, default=1)
    _opt(group, "--producers", "N", "concurrent producing tasks (default 1)",
               type=positive_int, default=1)  # fmt: skip
    _opt(group, "--pack-size", "N", "messages per produce call (default 1)",
               type=positive_int, default=1)  # fmt: skip
    _opt(
        group, "--rate", "N|max",
        "messages per second, all producers together: open loop, latency counted from each "
        "message's intended send time (coordinated omission corrected); 'max' (default): "
        "closed loop, each producer sends when its previous send returned", default="max",
    )  # fmt: skip
    _opt(group, "--warmup", "SECONDS", "unmeasured sending first (default 1)",
               default="1")  # fmt: skip
    if prebuilt:
        _opt(
            group, "--prebuilt", "N",
            "build N packs per channel before measuring and send them over and over (the "
            "same msg_ids and timestamps again): measures the client, not the building of "
            "messages; 0 (default): each pack is built as it is sent, inside the measured time",
            type=non_negative_int, default=0,
        )  # fmt: skip
    length = group.add_mutually_exclusive_group()
    _opt(length, "--duration", "SECONDS", "measure this long (default 10)")
    _opt(length, "--messages", "N", "measure this many messages instead",
               type=positive_int)  # fmt: skip


def _produce(parser: argparse.ArgumentParser) -> None:
    """Produce a workload through msgstream and report latency percentiles (an HDR
    histogram), msgs/s, MB/s and errors, ending with kafka-producer-perf-test's summary
    line. --baseline raw interleaves the backend's own client sending the same bytes with
    the same settings, and shows each figure's ratio. Exit 0, or 1 when a send failed
    during the measurement (errors are counted, never hidden)."""
    _add_target(parser)
    _add_workload(parser)
    _opt(
        parser, "--baseline", "raw",
        "also measure the backend's raw client (rocksdict put, aiokafka send_and_wait, "
        "pulsar.asyncio send), interleaved in slices", choices=["raw"],
    )  # fmt: skip
    _opt(parser, "--slice", "SECONDS",
               "length of the alternating slices with --baseline (default 1)",
               type=positive_float, default=1.0)  # fmt: skip
    _add_output(parser)


def _compare(parser: argparse.ArgumentParser) -> None:
    """Run one produce workload through msgstream on each backend named, in alternating
    slices within one run, and print one table (the first backend is the baseline of the
    ratios). Addresses come from the configuration, --address NAME=ADDR and --set."""
    _opt(parser, "--backends", "A,B,...", "backends to compare (e.g. rocksmq,kafka,pulsar)",
               required=True)  # fmt: skip
    _add_target(parser, many=True)
    _add_workload(parser)
    _opt(parser, "--slice", "SECONDS", "length of the alternating slices (default 1)",
               type=positive_float, default=1.0)  # fmt: skip
    _add_output(parser)


def _e2e(parser: argparse.ArgumentParser) -> None:
    """At a given rate, produce time-ticked messages over 1, 4, 16 and 64 channels
    (--channel-counts) while a TtMsgStream consumes them: the latency from each message's
    intended send time to its delivery in a pack, the pack latency from the time tick that
    closed it to its delivery, and the consumer's msgs/s draining a backlog."""
    _add_target(parser)
    _add_workload(parser, channels=False, prebuilt=False)
    _opt(parser, "--channel-counts", "N,N,...", "channel counts to run (default 1,4,16,64)",
               default="1,4,16,64")  # fmt: skip
    _opt(parser, "--tick-interval", "SECONDS", "time-tick interval (default 0.01)",
               type=positive_float, default=0.01)  # fmt: skip
    _add_output(parser, progress=False)


def _plot(parser: argparse.ArgumentParser) -> None:
    """Draw the latency percentile distribution of every run in the given --json files on
    HdrHistogram's 1/(1-q) axis, overlaid, plus latency and throughput over time. Needs
    pip install 'msgstream[bench]' (matplotlib)."""
    parser.add_argument("runs", nargs="+", metavar="RUN.json", help="--json files of bench runs")
    _opt(parser, "-o", "OUT", "out.png or out.html (self-contained, works offline)",
               dest="out", required=True)  # fmt: skip
    _opt(parser, "--title", "TEXT", "the charts' title")


_SUBCOMMANDS: tuple[tuple[str, str, Callable[[argparse.ArgumentParser], None]], ...] = (
    ("produce", "produce latency and throughput (optionally beside the raw client)", _produce),
    ("compare", "one workload on several backends, one table", _compare),
    ("e2e", "produce-to-consume and time-tick pack latency, consume throughput", _e2e),
    ("plot", "chart runs from their --json files (PNG or self-contained HTML)", _plot),
)
"""Each ``msgstream bench WHAT``: its name, its line in ``--help``, and the function that
declares its options (whose docstring is its ``--help`` text)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmarks of produce latency and throughput through msgstream, on any configured
    backend, open or closed loop, with HDR histograms, JSON and HdrHistogram logs,
    charts, and the raw client as a baseline."""
    sub = parser.add_subparsers(dest="bench_command", metavar="WHAT", required=True)
    for name, help, add in _SUBCOMMANDS:
        add(sub.add_parser(name, help=help, description=inspect.getdoc(add)))


BENCH = Command.documented(
    "bench",
    "benchmark produce latency on your broker (produce, e2e, compare, plot)",
    add_arguments,
    "msgstream.bench.cli:handle",
    "msgstream[bench]",
)
