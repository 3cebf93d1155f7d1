"""The ``msgstream bench`` handler: builds the run from the options, runs it, reports it.

SIGINT and SIGTERM (:class:`~msgstream.runtime.shutdown.StopOnSignals`) stop a run the way they
stop the other commands: the sends in flight complete, the summary is printed and the
promised ``--json`` / ``--hdr-log`` files are written from what was measured, and the
command exits 130 or 143.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable

from rich.progress import TextColumn

from ..cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    stderr_is_tty,
    stderr_progress,
    stdout_console,
)
from ..configuration.config import Config, resolve_backend
from ..runtime.shutdown import StopOnSignals
from .common import (
    announce,
    brokers_of,
    channel_names,
    delete_channels,
    parse_addresses,
    single_target,
    stopped_reason,
    target_config,
    workload_from_args,
    write_outputs,
)
from .recorder import Stats
from .report import summary_line, table
from .runner import RunControl, Side, run_sides
from .targets import MsgStreamTarget, Target, raw_target
from .workload import MessageFactory, Workload, WorkloadError

PROGRESS_AFTER_S = 3.0
"""Runs planned longer than this show a live progress display (on a terminal)."""


async def handle(config: Config, args: argparse.Namespace) -> int:
    try:
        if args.bench_command == "plot":
            from .plot import plot_files

            plot_files(list(args.runs), args.out, title=args.title)
            print(f"wrote {args.out}", flush=True)
            return EXIT_OK
        if args.bench_command == "e2e":
            from .e2e import run_e2e

            return await run_e2e(config, args)
        if args.bench_command == "compare":
            return await compare(config, args)
        return await produce(config, args)
    except WorkloadError as exc:
        raise CliError(str(exc)) from None


# --------------------------------------------------------------------------- options


# --------------------------------------------------------------------------- running


class Progress:
    """The figures so far, per side: messages, rate, p99, errors. On a terminal, runs
    planned longer than :data:`PROGRESS_AFTER_S` show them in a live display; with
    ``lines`` (``--progress``), they are printed as one line per interval on stderr
    instead, for logs and scripts."""

    def __init__(self, planned_s: float, *, lines: bool = False) -> None:
        self.lines = lines
        enabled = not lines and stderr_is_tty() and planned_s > PROGRESS_AFTER_S
        self.display = stderr_progress(TextColumn("{task.description}"), enabled=enabled)
        self.task = self.display.add_task("starting", total=None)

    def __call__(self, side: Side, sent: int, stats: Stats, seconds: float) -> None:
        rate = sent / seconds if seconds > 0 else 0.0
        errors = side.recorder.errors_so_far
        if self.lines:
            print(
                f"progress: {side.name}: sent={sent} msgs_per_s={rate:.1f} "
                f"p99_ms={stats.ms(99.0):.3f} errors={errors} elapsed_s={seconds:.1f}",
                file=sys.stderr,
                flush=True,
            )
            return
        self.display.update(
            self.task,
            description=(
                f"{side.name}: {sent:,} msgs, {rate:,.0f} msgs/s, p99 {stats.ms(99.0):.3f} ms, "
                f"errors {errors}"
            ),
        )


def planned_seconds(workload: Workload, sides: int) -> float:
    if workload.duration_s is not None:
        return workload.warmup_s * sides + workload.duration_s * sides
    if workload.rate is not None and workload.messages is not None:
        return workload.warmup_s * sides + workload.messages / workload.rate * sides
    return workload.warmup_s * sides + 10.0  # unknown: a closed-loop count


async def _measure(
    sides: list[Side],
    workload: Workload,
    channels: list[str],
    args: argparse.Namespace,
    control: RunControl,
    clean_up: Callable[[], Awaitable[None]],
) -> None:
    """Run the sides with a progress display, then delete the run's channels with
    ``clean_up`` (unless ``--keep-channels``), whatever happened."""
    progress = Progress(planned_seconds(workload, len(sides)), lines=args.progress)
    try:
        with progress.display:
            await run_sides(
                sides, workload, channels, control=control, slice_s=float(args.slice),
                progress=progress,
            )  # fmt: skip
    finally:
        if not args.keep_channels:
            await clean_up()


def _exit_status(stop: StopOnSignals, sides: list[Side]) -> int:
    """A signal's exit status, else failure if any side had errors."""
    if stop.received is not None:
        return stop.exit_code
    return EXIT_FAILED if any(s.recorder.errors for s in sides) else EXIT_OK


async def produce(config: Config, args: argparse.Namespace) -> int:
    workload = workload_from_args(args)
    cfg = single_target(config, args)
    backend = resolve_backend(cfg)
    channels = channel_names(workload.channels)
    ours = Side(MsgStreamTarget(cfg), "msgstream", backend)
    sides = [ours]
    baseline: Side | None = None
    if args.baseline == "raw":
        raw: Target = raw_target(cfg)
        baseline = Side(raw, raw.label, backend)
        sides.append(baseline)

    async def clean_up() -> None:
        raw_channels = list(getattr(baseline.target, "channels", [])) if baseline else []
        await delete_channels(cfg, channels + raw_channels)

    control = RunControl()
    async with StopOnSignals(control) as stop:
        brokers = await brokers_of({backend: cfg})
        await _measure(sides, workload, channels, args, control, clean_up)
        stopped = stopped_reason(stop)
        console = stdout_console()
        title = (
            f"msgstream bench produce on {backend}: {MessageFactory(workload).message_bytes} B "
            f"messages, {workload.to_json()['mode']}"
            + (f" at {workload.rate:g} msgs/s" if workload.rate else "")
            + f", {workload.channels} channel(s), {workload.producers} producer(s), "
            f"pack {workload.pack_size}"
        )
        console.print(table(title, sides, baseline))
        for side in sides:
            errors = side.recorder.error_kinds
            if errors:
                kinds = ", ".join(f"{n} {k}" for k, n in sorted(errors.items()))
                print(f"{side.name}: {side.recorder.errors} errors ({kinds})", file=sys.stderr)
        write_outputs(
            args, "produce", sides, workload, baseline=baseline, stopped=stopped,
            message_bytes=MessageFactory(workload).message_bytes, brokers=brokers,
        )  # fmt: skip
        for side in sides:
            prefix = "" if len(sides) == 1 else f"{side.name}: "
            print(prefix + summary_line(side), flush=True)
        announce(stop)
    return _exit_status(stop, sides)


async def compare(config: Config, args: argparse.Namespace) -> int:
    names = [n.strip() for n in str(args.backends).split(",") if n.strip()]
    if len(names) < 2 or len(set(names)) != len(names):
        raise CliError("--backends: name two or more different backends (rocksmq,kafka)")
    workload = workload_from_args(args)
    addresses = parse_addresses(args.address, None)
    configs = {name: target_config(config, name, addresses, args.overrides) for name in names}
    sides = [Side(MsgStreamTarget(cfg), name, name) for name, cfg in configs.items()]
    channels = channel_names(workload.channels)

    async def clean_up() -> None:
        for cfg in configs.values():
            await delete_channels(cfg, channels)

    control = RunControl()
    async with StopOnSignals(control) as stop:
        brokers = await brokers_of(configs)
        await _measure(sides, workload, channels, args, control, clean_up)
        message_bytes = MessageFactory(workload).message_bytes
        title = (
            f"msgstream bench compare: {message_bytes} B messages, {workload.to_json()['mode']}"
            + (f" at {workload.rate:g} msgs/s" if workload.rate else "")
            + f", {workload.channels} channel(s); ratios to {names[0]}"
        )
        stdout_console().print(table(title, sides, sides[0]))
        write_outputs(
            args, "compare", sides, workload, baseline=sides[0], stopped=stopped_reason(stop),
            message_bytes=message_bytes, brokers=brokers,
        )  # fmt: skip
        for side in sides:
            print(f"{side.name}: {summary_line(side)}", flush=True)
        announce(stop)
    return _exit_status(stop, sides)
