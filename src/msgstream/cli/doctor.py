"""``msgstream doctor``: check an embedded rocksmq store; with ``--repair``, recover it."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from typing import Any

from rich.table import Table

from ..config import Config
from .common import EXIT_FAILED, EXIT_OK, Subparsers, stdout_console
from .output import dumps


def add_parser(sub: Subparsers, parent: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "doctor",
        parents=[parent],
        help="check a rocksmq store for damage; --repair recovers what can be read",
        description=(
            "Read every record of an embedded rocksmq store (read-only: nothing is "
            "written), say which file is damaged and which message ids of which channel "
            "cannot be read. With --repair, rebuild the store from everything readable, "
            "record the lost ids so reads pass over them, and keep the damaged store as "
            "PATH.damaged-<time>. Exit codes: 0 healthy (or repaired), 1 damaged."
        ),
    )
    parser.add_argument(
        "path",
        nargs="?",
        metavar="PATH",
        help="the store's directory (default: rocksmq.path of the configuration)",
    )
    parser.add_argument(
        "--repair",
        action="store_true",
        help="recover what can be recovered (the store must be closed everywhere)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=handle)


def _ranges(ranges: list[tuple[int, int]]) -> str:
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in ranges) or "-"


def render(diagnosis: Any) -> Table:
    state = "repaired" if diagnosis.backup else "healthy" if diagnosis.healthy else "DAMAGED"
    table = Table(title=f"rocksmq store {diagnosis.path}: {state}")
    for name, justify in (
        ("channel", "left"),
        ("readable messages", "right"),
        ("ids", "right"),
        ("lost ids", "left"),
        ("lost before (holes)", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for health in diagnosis.channels:
        table.add_row(
            health.channel,
            str(health.messages),
            f"{health.floor}..{health.end_id - 1}" if health.end_id > health.floor else "-",
            _ranges(health.lost),
            _ranges(health.holes),
        )
    return table


async def handle(config: Config, args: argparse.Namespace) -> int:
    from msgstream.backends.rocksmq.settings import RocksmqConfig  # loaded only when used

    doctor = importlib.import_module("msgstream.backends.rocksmq.doctor")
    path = args.path or config.section(RocksmqConfig).resolved_path()
    diagnosis = doctor.repair(path) if args.repair else doctor.check(path)
    if args.json:
        print(dumps({**dataclasses.asdict(diagnosis), "healthy": diagnosis.healthy}), flush=True)
    else:
        out = stdout_console()
        out.print(render(diagnosis))
        for problem in diagnosis.problems:
            out.print(f"damaged: {problem}", markup=False)
        if diagnosis.backup:
            lost = sum(h.lost_count for h in diagnosis.channels)
            out.print(
                f"repaired: {lost} message id(s) could not be recovered; the damaged store "
                f"is kept at {diagnosis.backup}",
                markup=False,
            )
        elif not diagnosis.healthy:
            out.print(f"run `msgstream doctor {diagnosis.path} --repair` to recover", markup=False)
    return EXIT_OK if diagnosis.healthy or diagnosis.backup else EXIT_FAILED
