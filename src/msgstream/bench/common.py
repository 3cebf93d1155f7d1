"""What the ``msgstream bench`` sub-commands share: the target's configuration, the
workload from the options, channel names, and the output files."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from ..cli.common import CliError
from ..configuration.config import Config, resolve_backend, split_key
from ..configuration.plugins import backend_names, backend_spec
from ..errors import ConfigError
from ..runtime.shutdown import StopOnSignals
from ..streams.factory import new_client
from .recorder import write_interval_log
from .report import document
from .runner import Side
from .targets import broker_info
from .workload import MessageFactory, Workload, WorkloadError, parse_rate, read_payload_file


def parse_addresses(values: Sequence[str], backend: str | None) -> dict[str, str]:
    """``--address ADDR`` (for ``backend``) and ``--address NAME=ADDR``."""
    found: dict[str, str] = {}
    for value in values:
        name, sep, address = value.partition("=")
        if sep and name in backend_names():
            found[name] = address
        elif backend is not None:
            found[backend] = value
        else:
            raise CliError(f"--address {value!r}: give it as NAME=ADDR (e.g. kafka=localhost:9092)")
    return found


def target_config(
    config: Config, backend: str | None, addresses: dict[str, str], overrides: Sequence[str]
) -> Config:
    """``config`` with ``mq.type`` set to ``backend``, its address and the ``--set``s."""
    changes: dict[str, dict[str, Any]] = {name: {} for name in config.sections()}
    if backend is not None:
        if backend not in backend_names():
            raise CliError(
                f"--backend: unknown backend {backend!r} (registered: {', '.join(backend_names())})"
            )
        changes["mq"]["type"] = backend
    for name, address in addresses.items():
        spec = backend_spec(name)
        if spec.selected_by is None:
            raise CliError(f"--address: backend {name!r} takes no address")
        changes[name][spec.selected_by] = address
    dotted: dict[str, str] = {}
    for item in overrides:
        key, sep, text = item.partition("=")
        try:
            split_key(key)
        except ConfigError:
            sep = ""
        if not sep:  # name the key only: the value may be a secret
            raise CliError(f"--set {key!r}: expected KEY=VALUE with a dotted key (kafka.acks=1)")
        dotted[key] = text
    built = config.with_values(changes).with_overrides(dotted)
    resolve_backend(built)  # a missing address is a ConfigError naming the key
    return built


def single_target(config: Config, args: argparse.Namespace) -> Config:
    """The one backend a run measures: ``--backend`` (else the configured one), with
    ``--address`` and the ``--set``s applied."""
    addresses = parse_addresses(args.address, args.backend or config.backend())
    return target_config(config, args.backend, addresses, args.overrides)


def workload_from_args(args: argparse.Namespace, *, channels: int | None = None) -> Workload:
    payload = None if args.payload_file is None else read_payload_file(args.payload_file)
    rate = parse_rate(str(args.rate))
    try:
        warmup = float(args.warmup)
        duration = None if args.duration is None else float(args.duration)
    except ValueError:
        raise WorkloadError("--warmup and --duration take seconds (a number)") from None
    if args.messages is None and duration is None:
        duration = 10.0
    workload = Workload(
        size=int(args.size),
        payload=payload,
        channels=int(channels if channels is not None else args.channels),
        producers=int(args.producers),
        pack_size=int(args.pack_size),
        rate=rate,
        warmup_s=warmup,
        duration_s=duration,
        messages=args.messages,
        interval_s=float(args.interval),
        prebuilt=int(getattr(args, "prebuilt", 0)),
    )
    MessageFactory(workload)  # a --size below the smallest message fails here
    return workload


def channel_names(count: int, tag: str = "") -> list[str]:
    stamp = f"{os.getpid()}-{time.monotonic_ns() % 10**9}"
    return [f"bench-{stamp}{tag}-{i}" for i in range(count)]


def stopped_reason(stop: StopOnSignals) -> str:
    if stop.received is None:
        return "completed"
    return "terminated" if stop.exit_code == 143 else "interrupted"


def write_outputs(
    args: argparse.Namespace,
    kind: str,
    sides: list[Side],
    workload: Workload | None,
    *,
    baseline: Side | None,
    stopped: str,
    message_bytes: int | None,
    brokers: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> None:
    if args.json_file:
        doc = document(
            kind, sides, workload, baseline=baseline, stopped=stopped,
            message_bytes=message_bytes, brokers=brokers, extra=extra,
        )  # fmt: skip
        libraries = {
            str(lib).split(" ")[0]: str(lib).split(" ", 1)[1]
            for side in sides
            if " " in str(lib := side.target.client().get("library", ""))
        }
        doc["library"].update(libraries)
        _write(args.json_file, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    if args.hdr_log:
        runs = [(s.name, s.recorder.started_epoch_s, s.recorder.intervals) for s in sides]
        path = Path(args.hdr_log)
        try:
            with path.open("w", encoding="ascii") as out:
                write_interval_log(out, runs)
        except OSError as exc:
            raise CliError(f"--hdr-log: cannot write {path}: {exc.strerror or exc}") from None


def _write(path: str, data: bytes) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise CliError(f"--json: cannot write {path}: {exc.strerror or exc}") from None


async def delete_channels(config: Config, channels: Sequence[str]) -> None:
    client = new_client(config)
    try:
        delete = getattr(client, "delete_channel", None)
        if delete is None:
            return
        for channel in channels:
            try:
                await delete(channel)
            except Exception as exc:  # leftovers are harmless; say so
                print(f"warning: could not delete channel {channel}: {exc}", file=sys.stderr)
    finally:
        await client.close()


def announce(stop: StopOnSignals) -> None:
    if stop.received is not None:
        print(stopped_reason(stop), file=sys.stderr, flush=True)


async def brokers_of(configs: dict[str, Config]) -> dict[str, Any]:
    return {name: await broker_info(cfg) for name, cfg in configs.items()}
