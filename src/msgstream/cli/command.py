"""What a ``msgstream`` command is, and how the CLI finds the ones other packages contribute.

The CLI core declares ``produce``, ``consume`` and ``inspect``. Any installed package adds
a command through an entry point of the ``msgstream.commands`` group naming a
:class:`Command`::

    [project.entry-points."msgstream.commands"]
    ingest = "msgstream.bridge_spark.cli.commands:INGEST"

The module an entry point names is imported every time the parser is built (every run,
``--help`` included), so it declares options only and imports nothing heavy; the handler
can be given as ``"module:function"``, imported only when the command runs. A handler
module that cannot be imported for want of a library makes the command exit 2 naming
what to install (:attr:`Command.install`); an entry point that cannot be loaded at all
still shows in ``--help`` and exits 2 naming the package that declared it.
"""

from __future__ import annotations

import argparse
import inspect
import pkgutil
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ..configuration.config import Config
from .common import CliError, Subparsers, one_line

ENTRY_POINT_GROUP = "msgstream.commands"

Handler = Callable[[Config, argparse.Namespace], Coroutine[Any, Any, int]]
"""Runs a parsed command; returns the exit code (raises ``CliError`` on a usage error)."""


@dataclass(frozen=True)
class Command:
    """One sub-command of ``msgstream``."""

    name: str
    help: str
    """One line in ``msgstream --help``."""
    description: str
    """The text of ``msgstream NAME --help``."""
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handler: Handler | str
    """The handler, or ``"module:function"`` to import it from when the command runs."""
    install: str | None = None
    """What to ``pip install`` for the handler's imports, e.g. ``"msgstream[spark]"``."""

    @classmethod
    def documented(
        cls,
        name: str,
        help: str,
        add_arguments: Callable[[argparse.ArgumentParser], None],
        handler: Handler | str,
        install: str | None = None,
    ) -> Command:
        """The command whose ``--help`` text is the docstring of ``add_arguments``: it is
        documented where its options are declared."""
        description = inspect.getdoc(add_arguments)
        if not description:
            raise ValueError(f"command {name!r}: {add_arguments.__qualname__} has no docstring")
        return cls(name, help, description, add_arguments, handler, install)

    def add_to(self, sub: Subparsers, common: argparse.ArgumentParser) -> None:
        """Add this command's parser (with the options every command shares) to ``sub``."""
        parser = sub.add_parser(
            self.name, parents=[common], help=self.help, description=self.description
        )
        self.add_arguments(parser)
        parser.set_defaults(command=self)

    def load_handler(self) -> Handler:
        if not isinstance(self.handler, str):
            return self.handler
        try:
            handler: Handler = pkgutil.resolve_name(self.handler)
        except ModuleNotFoundError as exc:
            if self.install is None:
                raise
            raise CliError(
                f"msgstream {self.name} needs pip install {self.install!r} ({exc})"
            ) from None
        return handler


def plugin_commands(taken: set[str]) -> Iterator[Command]:
    """The commands of the ``msgstream.commands`` entry points, by name, except those whose
    name is in ``taken`` (the core's commands win)."""
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if entry.name in taken:
            continue
        taken.add(entry.name)
        try:
            command = entry.load()
        except Exception as exc:  # a broken plug-in must not take the other commands down
            yield _unloadable(entry, one_line(exc))
            continue
        if not isinstance(command, Command):
            yield _unloadable(entry, f"{type(command).__name__} is not a msgstream Command")
            continue
        yield command


def _unloadable(entry: EntryPoint, reason: str) -> Command:
    """A stand-in listed under the entry point's name; running it says why it cannot."""
    source = entry.value if entry.dist is None else f"{entry.value} (package {entry.dist.name})"
    problem = f"cannot load {source}: {reason}"

    def accept_anything(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    async def refuse(config: Config, args: argparse.Namespace) -> int:
        raise CliError(f"msgstream {entry.name}: {problem}")

    return Command(entry.name, f"(unavailable: {problem})", problem, accept_anything, refuse)
