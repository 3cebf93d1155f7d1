"""Helpers shared by the CLI commands: configuration, argument types, consoles, exit codes."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from rich.console import Console, JustifyMethod
from rich.logging import RichHandler
from rich.progress import Progress, ProgressColumn, TimeElapsedColumn
from rich.table import Table

from ..contract.channels import validate_channel_name
from ..errors import InvalidChannelNameError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
"""128 + SIGTERM, as a shell reports a process SIGTERM killed; here it was stopped cleanly."""


class CliError(Exception):
    """A user error found by the CLI itself (bad argument value, unreadable file, ...).

    Like every ``MsgStreamError`` it is printed as one ``error: ...`` line and exits 2.
    """


if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Options = TypeVar("_Options", bound="DataclassInstance")


def channel_name(value: str) -> str:
    """argparse ``type=`` for channel names: the portable rules of every backend."""
    try:
        return validate_channel_name(value)
    except InvalidChannelNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {number}")
        return number

    return parse


positive_int = _int_at_least(1)
"""argparse ``type=`` for integers >= 1."""
non_negative_int = _int_at_least(0)
"""argparse ``type=`` for integers >= 0."""


def positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not number > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {value!r}")
    return number


PIPE_WIDTH = 160
"""Console width when stdout is not a terminal (rich would otherwise assume 80)."""


def stdout_console() -> Console:
    """A console on the *current* ``sys.stdout`` (so test capture works)."""
    console = Console(file=sys.stdout, soft_wrap=True, highlight=False)
    if not console.is_terminal:
        console.width = PIPE_WIDTH
    return console


def stderr_console() -> Console:
    return Console(file=sys.stderr, stderr=True, soft_wrap=True, highlight=False)


def stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def stdin_is_tty() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def cli_logging(verbosity: int) -> Iterator[None]:
    """Log to stderr for the duration of one command: warnings by default, ``-v`` info,
    ``-vv`` debug. The handler is removed afterwards (``main`` may run many times in one
    process, e.g. under pytest)."""
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = RichHandler(
        console=stderr_console(), show_time=verbosity > 0, show_path=False, markup=False
    )
    handler.setLevel(level)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, old_level) if old_level else level)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def fmt_rate(count: int, seconds: float) -> int:
    """Messages per second as an integer (0 when nothing happened)."""
    if count <= 0:
        return 0
    return int(count / max(seconds, 1e-9))


def one_line(exc: BaseException) -> str:
    """An exception as one line of text (its type when it has no message)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def stderr_progress(*columns: ProgressColumn | str, enabled: bool | None = None) -> Progress:
    """A progress display on stderr, followed by the elapsed time; shown only while running
    and (unless ``enabled`` says otherwise) only when stderr is a terminal."""
    return Progress(
        *columns,
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
        disable=not (stderr_is_tty() if enabled is None else enabled),
    )


def options_from(cls: type[_Options], args: argparse.Namespace, **computed: Any) -> _Options:
    """A command's options dataclass ``cls`` from its parsed ``args``: every field that is
    not in ``computed`` is the parsed option of the same name (argparse has already
    converted and checked it); ``computed`` gives the rest."""
    fields = [f.name for f in dataclasses.fields(cls) if f.name not in computed]
    return cls(**{name: getattr(args, name) for name in fields}, **computed)


def add_channel_option(
    parser: argparse.ArgumentParser, help: str, *, required: bool = False
) -> None:
    """``--channel C``, repeatable, checked against the portable channel-name rules."""
    parser.add_argument(
        "--channel",
        dest="channels",
        action="append",
        required=required,
        type=channel_name,
        metavar="C",
        help=help,
    )


def add_option(
    parser: argparse.ArgumentParser, flag: str, metavar: str, help: str, **settings: Any
) -> None:
    """An option that takes a value; ``settings`` are argparse's (``type``, ``default``...)."""
    parser.add_argument(flag, metavar=metavar, help=help, **settings)


def add_count(parser: argparse.ArgumentParser, flag: str, help: str, default: int) -> None:
    """``FLAG N``: a count of one or more, whose help ends with its default (stated once,
    here, from the value)."""
    parser.add_argument(
        flag, metavar="N", type=positive_int, default=default, help=f"{help} (default {default})"
    )


def add_flag(parser: argparse.ArgumentParser, flag: str, help: str) -> None:
    """An option without a value: True when given."""
    parser.add_argument(flag, action="store_true", help=help)


def add_json_option(parser: argparse.ArgumentParser, help: str = "print one JSON document") -> None:
    add_flag(parser, "--json", help)


def new_table(title: str, columns: Sequence[tuple[str, JustifyMethod]]) -> Table:
    """A table with the given (name, justification) columns."""
    table = Table(title=title)
    for name, justify in columns:
        table.add_column(name, justify=justify)
    return table


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""The type of ``parser.add_subparsers()``; each command module adds its parser to it."""
