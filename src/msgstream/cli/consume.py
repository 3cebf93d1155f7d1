"""``msgstream consume``: read packs from channels and print them."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..configuration.config import Config
from ..errors import InvalidPositionError, TopicNotFoundError
from ..streams.factory import MsgStreamFactory
from ..streams.stream import MissingChannels, MsgStream
from ..streams.ttstream import TtMsgStream
from ..wire.messages import TimeTickMsg
from ..wire.pack import MsgPack
from ..wire.position import (
    MsgPosition,
    SubscriptionPosition,
    positions_from_json,
    positions_to_json,
)
from .command import Command
from .common import (
    CliError,
    add_channel_option,
    add_flag,
    add_json_option,
    add_option,
    channel_name,
    options_from,
    positive_float,
    positive_int,
    stderr_console,
    stdin_is_tty,
    stdout_console,
)
from .output import describe_msg, describe_pack, dumps, id_formatter, pack_to_json

DEFAULT_SUBNAME = "msgstream-cli"
DEFAULT_PIPE_IDLE_S = 5.0
MAX_MSGS_SHOWN = 10

StartKind = Literal["subscription", "earliest", "latest", "positions"]


@dataclass(frozen=True)
class StartSpec:
    """Where the consumer starts: its subscription's cursor, earliest, latest or positions."""

    kind: StartKind
    positions: tuple[MsgPosition, ...] = ()


@dataclass(frozen=True)
class ConsumeOptions:
    channels: list[str]
    subname: str = DEFAULT_SUBNAME
    start: StartSpec = StartSpec("subscription")
    tt: bool = False
    max_packs: int | None = None
    idle_timeout_s: float | None = None
    ack: bool = False
    json: bool = False
    skip_empty: bool = False
    skip_ticks: bool = False
    full_vectors: bool = False
    inclusive: bool = False
    save_positions: str | None = None
    wait_for_channels: bool = False
    to_latest: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Consume channels with a plain MsgStream (one message per pack) or, with --tt, a
    TtMsgStream (packs aligned on time ticks). Without --from, an existing subscription
    resumes after its last ack and a new one starts at the earliest message. The last
    line, on stderr, gives the counts."""
    add_channel_option(
        parser,
        "channel to consume (repeat for several); defaults to the channels of --from positions",
    )
    add_option(parser, "--subname", "S", "subscription name", default=DEFAULT_SUBNAME)
    add_option(
        parser, "--from", "WHERE",
        "where to start, whatever the subscription acked: 'earliest', 'latest' (only "
        "messages produced from now on), positions JSON (a list of positions, or one) or "
        "@FILE holding it. A --tt stream resumes exactly after the pack whose end_positions "
        "are given; a plain stream resumes after the message of each position (see "
        "--inclusive)",
        dest="start",
    )  # fmt: skip
    add_flag(parser, "--tt", "use a TtMsgStream (time-tick packs)")
    add_option(parser, "--max-packs", "N", "stop after N packs", type=positive_int)
    add_option(
        parser, "--idle-timeout", "SECONDS",
        "stop when no pack arrived for SECONDS (default: run until Ctrl-C; "
        f"{DEFAULT_PIPE_IDLE_S:g} s when stdin is not a terminal and no limit is given)",
        type=positive_float,
    )  # fmt: skip
    add_flag(
        parser, "--ack",
        "acknowledge each pack once printed (--tt: up to, per channel, the last message "
        "that it and everything before it was delivered)",
    )  # fmt: skip
    add_json_option(parser, "print one JSON object per pack")
    add_flag(parser, "--skip-empty", "do not print or count empty packs (--tt)")
    add_flag(
        parser, "--skip-ticks",
        "plain stream: do not print or count TimeTickMsgs (still acked with --ack)",
    )  # fmt: skip
    add_flag(parser, "--full-vectors", "print float vectors in full (--json)")
    add_flag(
        parser, "--inclusive",
        "plain stream with --from positions: start AT each position's message",
    )  # fmt: skip
    add_flag(
        parser, "--to-latest",
        "stop once every channel was read up to the newest message it held when consuming "
        "began (exact, where --idle-timeout guesses; --tt: at the last pack every "
        "channel's ticks close). Needs --from, as where a subscription resumes after its "
        "acks is not known",
    )  # fmt: skip
    add_flag(
        parser, "--wait-for-channels",
        "wait for channels that do not exist yet until a producer creates them (without "
        "it, a missing channel is an error: usually a typo)",
    )  # fmt: skip
    add_option(
        parser, "--save-positions", "FILE",
        "on exit, write positions to resume from (for --from @FILE): a --tt stream's "
        "last end_positions, or each channel's last consumed message",
    )  # fmt: skip


def parse_from(value: str | None) -> StartSpec:
    """Parse ``--from``: a keyword, positions JSON, or ``@FILE`` holding positions JSON."""
    if value is None:
        return StartSpec("subscription")
    text = value.strip()
    if text in ("earliest", "latest"):
        return StartSpec(text)  # type: ignore[arg-type]
    source = "--from"
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        source = f"--from @{path}"
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"{source}: cannot read positions file: {exc}") from None
    elif text[:1] not in ("[", "{"):
        raise CliError(
            f"--from: expected 'earliest', 'latest', positions JSON or @FILE, got {value!r}"
        )
    try:
        positions = positions_from_json(text)
    except InvalidPositionError as exc:
        raise CliError(f"{source}: {exc}") from None
    if not positions:
        raise CliError(f"{source}: the positions list is empty")
    channels = [p.channel for p in positions]
    dupes = sorted({c for c in channels if channels.count(c) > 1})
    if dupes:
        raise CliError(f"{source}: more than one position for channel(s) {dupes}")
    for position in positions:
        try:
            channel_name(position.channel)
        except argparse.ArgumentTypeError as exc:
            raise CliError(f"{source}: {exc}") from None
    return StartSpec("positions", tuple(positions))


def options_from_args(args: argparse.Namespace) -> ConsumeOptions:
    start = parse_from(args.start)
    channels: list[str] = list(args.channels or [])
    if not channels:
        if start.kind != "positions":
            raise CliError("--channel is required (unless --from gives positions)")
        channels = [p.channel for p in start.positions]
    if len(set(channels)) != len(channels):
        raise CliError(f"--channel: duplicate channels in {channels}")
    if start.kind == "positions":
        unknown = [p.channel for p in start.positions if p.channel not in channels]
        if unknown:
            raise CliError(f"--from: positions for channels not consumed (--channel): {unknown}")
        if args.tt:
            missing = [c for c in channels if c not in {p.channel for p in start.positions}]
            if missing:
                raise CliError(
                    f"--from: no position for channel(s) {missing}; a --tt stream seeks "
                    "every channel (give one pack's end_positions)"
                )
    if args.to_latest:
        _check_to_latest(args, start, channels)
    idle: float | None = args.idle_timeout
    if idle is None and args.max_packs is None and not args.to_latest and not stdin_is_tty():
        idle = DEFAULT_PIPE_IDLE_S
    return options_from(ConsumeOptions, args, channels=channels, start=start, idle_timeout_s=idle)


def _check_to_latest(args: argparse.Namespace, start: StartSpec, channels: list[str]) -> None:
    """``--to-latest`` ends where each channel's reading reaches its newest message, so
    where that reading starts must be known."""
    if start.kind == "subscription":
        raise CliError(
            "--to-latest needs --from (earliest, latest or positions): a subscription "
            "resumes after its acks, and where that is cannot be told, so neither can "
            "when it is done"
        )
    if start.kind == "positions":
        missing = [c for c in channels if c not in {p.channel for p in start.positions}]
        if missing:
            raise CliError(f"--to-latest: no position for channel(s) {missing} in --from")
    if args.wait_for_channels:
        raise CliError(
            "--to-latest reads what the channels hold now; it cannot wait for channels "
            "(drop --wait-for-channels)"
        )


async def handle(config: Config, args: argparse.Namespace) -> int:
    return await run_consume(config, options_from_args(args))


COMMAND = Command.documented(
    "consume",
    "consume packs from channels and print them",
    add_arguments,
    handle,
)


# --------------------------------------------------------------------------- subscribing


async def subscribe(stream: MsgStream, opts: ConsumeOptions) -> None:
    """Subscribe ``stream`` and move it to where ``opts.start`` says."""
    start = opts.start
    missing: MissingChannels = "wait" if opts.wait_for_channels else "error"
    if start.kind == "subscription":
        await stream.as_consumer(
            opts.channels, opts.subname, SubscriptionPosition.EARLIEST, missing=missing
        )
        return
    client = stream.client
    stop_at = None
    if opts.to_latest:  # every channel has a known start (checked with the options)
        for channel in opts.channels:
            await stream.check_topic_valid(channel)
        stop_at = {c: await stream.get_latest_msg_id(c) for c in opts.channels}
    if start.kind == "positions":
        for position in start.positions:  # another backend's id is refused before anything
            client.message_id_from_bytes(position.msg_id)
        covered = [p.channel for p in start.positions]
        await stream.as_consumer(
            covered, opts.subname, SubscriptionPosition.UNKNOWN, missing=missing,
            stop_at=stop_at,
        )  # fmt: skip
        rest = [c for c in opts.channels if c not in covered]
        if rest:  # plain streams only (checked in options_from_args)
            await stream.as_consumer(
                rest, opts.subname, SubscriptionPosition.EARLIEST, missing=missing
            )
        inclusive = opts.tt or opts.inclusive
        await stream.seek(list(start.positions), include_current=inclusive)
        return
    await stream.as_consumer(
        opts.channels, opts.subname, SubscriptionPosition.UNKNOWN, missing=missing,
        stop_at=stop_at,
    )  # fmt: skip
    earliest = client.earliest_message_id()
    if start.kind == "earliest":  # inclusive: the earliest id sorts before every message
        targets = [MsgPosition(c, earliest.to_bytes(), opts.subname, 0) for c in opts.channels]
        await stream.seek(targets, include_current=True)
        return
    targets = []
    for channel in opts.channels:
        latest = await stream.get_latest_msg_id(channel)
        if latest is None:  # empty channel: everything is new
            targets.append(MsgPosition(channel, earliest.to_bytes(), opts.subname, 0))
        else:
            targets.append(MsgPosition(channel, latest.to_bytes(), opts.subname, 0))
    # Just after the latest message. A TtMsgStream refuses exclusive seeks because a pack's
    # end position may be a message not yet delivered; these positions are messages that
    # were delivered (or never will be), so the plain stream's exclusive seek is right.
    await MsgStream.seek(stream, targets, include_current=False)


# --------------------------------------------------------------------------- consuming


@dataclass
class ConsumeStats:
    packs: int = 0
    empty_packs: int = 0
    messages: int = 0
    acked: int = 0
    ticks_skipped: int = 0
    stopped: str = "end"
    last_end_positions: list[MsgPosition] = field(default_factory=list)
    last_by_channel: dict[str, MsgPosition] = field(default_factory=dict)


async def _ack(stream: MsgStream, pack: MsgPack) -> int:
    """Acknowledge a pack (its ``ack_positions``); return how many positions were acked.

    For a TtMsgStream pack these stop short of any message not yet delivered, so a
    subscription resumed from the acks loses nothing; exact resumption is done with
    positions (``--save-positions`` / ``--from``).
    """
    await stream.ack(pack)
    return len(pack.ack_positions)


async def _warn_missing_channels(stream: MsgStream, channels: Sequence[str]) -> None:
    """With --wait-for-channels, say on stderr which channels it waits for."""
    for channel in channels:
        try:
            await stream.check_topic_valid(channel)
        except TopicNotFoundError as exc:
            hint = f" ({exc.hint})" if exc.hint else ""  # a typo would wait for ever
            print(
                f"warning: channel {channel!r} does not exist yet; waiting for it{hint}",
                file=sys.stderr,
            )


async def run_consume(config: Config, opts: ConsumeOptions) -> int:
    factory = MsgStreamFactory(config)
    stream: MsgStream = factory.new_ttmsgstream() if opts.tt else factory.new_msgstream()
    stats = ConsumeStats()
    if opts.start.kind == "positions":
        # Where we stand if nothing arrives (kept by --save-positions).
        if opts.tt:
            stats.last_end_positions = list(opts.start.positions)
        elif not opts.inclusive:
            stats.last_by_channel = {p.channel: p for p in opts.start.positions}
    out = stdout_console()
    started = time.perf_counter()
    try:
        async with stream:
            loop = asyncio.get_running_loop()
            idle = opts.idle_timeout_s
            deadline = None if idle is None else loop.time() + idle
            if opts.wait_for_channels:
                await _warn_missing_channels(stream, opts.channels)
            try:
                async with asyncio.timeout_at(deadline):  # --idle-timeout covers the wait
                    await subscribe(stream, opts)
            except TopicNotFoundError as exc:
                hint = "" if opts.to_latest else " (--wait-for-channels waits for it)"
                raise CliError(f"{exc}{hint}") from None
            except TimeoutError:
                stats.stopped = "idle"
                return 0
            format_id = id_formatter(stream.client)
            packs = aiter(stream)
            while opts.max_packs is None or stats.packs < opts.max_packs:
                try:
                    async with asyncio.timeout_at(deadline):
                        pack = await anext(packs)
                except TimeoutError:
                    stats.stopped = "idle"
                    break
                except StopAsyncIteration:
                    break
                if opts.tt:
                    stats.last_end_positions = list(pack.end_positions)
                else:
                    for position in pack.end_positions:
                        stats.last_by_channel[position.channel] = position
                if not pack.msgs:
                    stats.empty_packs += 1
                    if opts.skip_empty:
                        continue
                if opts.skip_ticks and all(isinstance(m, TimeTickMsg) for m in pack.msgs):
                    stats.ticks_skipped += 1
                    if opts.ack:
                        stats.acked += await _ack(stream, pack)
                    continue
                stats.packs += 1
                stats.messages += len(pack.msgs)
                if idle is not None:
                    deadline = loop.time() + idle
                if opts.json:
                    print(dumps(pack_to_json(pack, full_vectors=opts.full_vectors)), flush=True)
                elif opts.tt:
                    out.print(describe_pack(stats.packs, pack), markup=False)
                    for msg in pack.msgs[:MAX_MSGS_SHOWN]:
                        out.print("  " + describe_msg(msg, format_id), markup=False)
                    if len(pack.msgs) > MAX_MSGS_SHOWN:
                        out.print(f"  ... {len(pack.msgs) - MAX_MSGS_SHOWN} more", markup=False)
                else:
                    out.print(describe_msg(pack.msgs[0], format_id), markup=False)
                if opts.ack:
                    stats.acked += await _ack(stream, pack)
            else:
                stats.stopped = "max-packs"
    except (asyncio.CancelledError, KeyboardInterrupt):
        stats.stopped = "interrupted"
        raise
    except BrokenPipeError:  # the reader of our output went away (`| head`): not an error
        stats.stopped = "output-closed"
        raise
    except Exception:
        stats.stopped = "error"
        raise
    finally:
        _save_positions(opts, stats)
        _report(stats, opts, time.perf_counter() - started, stream)
    return 0


def _save_positions(opts: ConsumeOptions, stats: ConsumeStats) -> None:
    if opts.save_positions is None:
        return
    positions = stats.last_end_positions if opts.tt else list(stats.last_by_channel.values())
    err = stderr_console()
    if not positions:
        err.print(
            f"warning: nothing consumed, no positions written to {opts.save_positions}",
            markup=False,
        )
        return
    try:
        Path(opts.save_positions).expanduser().write_text(
            positions_to_json(positions) + "\n", encoding="utf-8"
        )
    except OSError as exc:
        err.print(f"warning: cannot write positions: {exc}", markup=False)


def _report(stats: ConsumeStats, opts: ConsumeOptions, elapsed: float, stream: MsgStream) -> None:
    parts = [
        f"packs={stats.packs}",
        f"messages={stats.messages}",
        f"empty_packs={stats.empty_packs}",
    ]
    if opts.skip_ticks:
        parts.append(f"ticks_skipped={stats.ticks_skipped}")
    if opts.ack:
        parts.append(f"acked={stats.acked}")
    read = stream.read_stats
    if read.decode_errors or read.unknown_types:
        parts.append(f"bad_messages={read.decode_errors + read.unknown_types}")
    if isinstance(stream, TtMsgStream) and stream.consumer_channels:
        barrier = stream.barrier.stats
        late = barrier.late_delivered + barrier.late_rejected
        if late:
            parts.append(f"late={late}")
        if barrier.duplicates_dropped:
            parts.append(f"duplicates_dropped={barrier.duplicates_dropped}")
    parts.append(f"stopped={stats.stopped}")
    parts.append(f"elapsed_s={elapsed:.2f}")
    stderr_console().print("consumed: " + " ".join(parts), markup=False)
