"""``msgstream doctor``, the command the rocksmq backend adds to the CLI (entry point
``msgstream.commands``): check an embedded store; with ``--repair``, recover it."""

from __future__ import annotations

import argparse
import dataclasses

from rich.table import Table

from msgstream.cli.command import Command
from msgstream.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    add_flag,
    add_json_option,
    new_table,
    stdout_console,
)
from msgstream.cli.output import dumps
from msgstream.configuration.config import Config

from . import doctor
from .errors import StorePathError
from .failures import check_store_path
from .settings import RocksmqConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Read every record of an embedded rocksmq store (read-only: nothing is written), say
    which file is damaged and which message ids of which channel cannot be read. With
    --repair, rebuild the store from everything readable, record the lost ids so reads
    pass over them, and keep the damaged store as PATH.damaged-<time>. Exit codes: 0
    healthy (or repaired), 1 damaged, 2 PATH holds no store (a usage error: nothing to
    check)."""
    parser.add_argument(
        "path",
        nargs="?",
        metavar="PATH",
        help="the store's directory (default: rocksmq.path of the configuration)",
    )
    add_flag(
        parser, "--repair", "recover what can be recovered (the store must be closed everywhere)"
    )
    add_json_option(parser)


def _ranges(ranges: list[tuple[int, int]]) -> str:
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in ranges) or "-"


def render(diagnosis: doctor.Diagnosis) -> Table:
    state = "repaired" if diagnosis.backup else "healthy" if diagnosis.healthy else "DAMAGED"
    table = new_table(
        f"rocksmq store {diagnosis.path}: {state}",
        [
            ("channel", "left"),
            ("readable messages", "right"),
            ("ids", "right"),
            ("lost ids", "left"),
            ("lost before (holes)", "left"),
        ],
    )
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
    path = args.path or config.section(RocksmqConfig).resolved_path()
    try:
        check_store_path(path, create=False)
    except StorePathError as exc:  # a path that is no store is a wrong argument, not damage
        raise CliError(str(exc)) from None
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


DOCTOR = Command.documented(
    "doctor",
    "check a rocksmq store for damage; --repair recovers what can be read",
    add_arguments,
    handle,
)
