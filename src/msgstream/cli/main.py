"""Entry point of the ``msgstream`` command (``[project.scripts] msgstream``)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import traceback
from collections.abc import Sequence

from .. import __version__
from ..configuration.config import Config, load_config
from ..errors import BackendUnavailableError, MsgStreamError
from . import consume, inspection, produce
from .command import Command, Handler, plugin_commands
from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    CliError,
    cli_logging,
    one_line,
)

CORE_COMMANDS = (produce.COMMAND, consume.COMMAND, inspection.COMMAND)
"""The commands of the core; packages add more (:mod:`msgstream.cli.command`)."""

_CONFIG_HELP = (
    "YAML configuration file (default: $MSGSTREAM_CONFIG, else built-in defaults: the "
    "embedded rocksmq store under $XDG_DATA_HOME/msgstream/rocksmq); MSGSTREAM_* "
    "environment variables override it"
)


def _add_common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """``--config`` and ``-v`` on the top-level parser and (without defaults, so they do
    not overwrite a top-level value) on every command."""
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS if suppress else None,
        help=_CONFIG_HELP,
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS if suppress else 0,
        help="log more (-v info, -vv debug) to stderr",
    )


def commands() -> list[Command]:
    """The core's commands, then those of the ``msgstream.commands`` entry points."""
    core = list(CORE_COMMANDS)
    return [*core, *plugin_commands({command.name for command in core})]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="msgstream",
        description=(
            "Produce to, consume from and inspect msgstream channels, plus the commands that "
            "installed packages add (bench; the Spark bridge's ingest, schema and demo; the "
            "rocksmq backend's doctor). Exit codes: 0 ok; 1 a runtime failure (a broker that "
            "cannot be reached or refuses, a full disk, a damaged or locked store), a failed "
            "check or input lines skipped (--skip-invalid); 2 a usage or configuration error "
            "(bad option, config key, position or channel name) or an input line that does not "
            "parse or fit; 130 interrupted (Ctrl-C), 143 terminated (SIGTERM), each after the "
            "command finished its current step and saved what it promised."
        ),
    )
    parser.add_argument("--version", action="version", version=f"msgstream {__version__}")
    _add_common(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    _add_common(common, suppress=True)
    sub = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    for command in commands():
        command.add_to(sub, common)
    return parser


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the final flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


class _Terminated(Exception):
    """The command was stopped by SIGTERM (and has wound down like on Ctrl-C)."""


async def _run(handler: Handler, config: Config, args: argparse.Namespace) -> int:
    """Run ``handler``; SIGTERM (what containers and systemd send) stops it the way Ctrl-C
    does: the command's task is cancelled, so it finishes its cleanup (saves positions,
    prints its summary) before the process exits with 143."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
        return await handler(config, args)
    try:
        return await handler(config, args)
    except asyncio.CancelledError:
        if terminated:
            raise _Terminated from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the process exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # usage error (2), --help / --version (0)
        code = exc.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)
    command: Command = args.command
    with cli_logging(int(args.verbose)):
        try:
            config = load_config(args.config)  # --config, else $MSGSTREAM_CONFIG, else defaults
            return asyncio.run(_run(command.load_handler(), config, args))
        except BackendUnavailableError as exc:  # the command was right; the world was not
            print(f"error: {one_line(exc)}", file=sys.stderr, flush=True)
            return EXIT_FAILED
        except (MsgStreamError, CliError) as exc:
            print(f"error: {one_line(exc)}", file=sys.stderr, flush=True)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr, flush=True)
            return EXIT_INTERRUPTED
        except _Terminated:
            print("terminated", file=sys.stderr, flush=True)
            return EXIT_TERMINATED
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_OK
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            print(f"error: unexpected {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
            return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
