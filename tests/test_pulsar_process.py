"""Pulsar in whole processes: programs that use the backend exit cleanly, and the C++
library's log lines reach Python logging (never stdout), at the level configured.

Each case is a subprocess, because both are about a process's life: the library keeps the
logger of the first client a process makes, and its threads outlive a client's close.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from brokers.ports import free_port

pytestmark = pytest.mark.pulsar

PROGRAM_HEAD = """
import asyncio, logging, sys
from msgstream import (
    DataType, FieldData, InsertMsg, MsgPack, SubscriptionPosition, config_from_dict,
    new_msgstream,
)

handler = logging.StreamHandler(sys.stderr)
handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(backend)s | %(message)s"))
library = logging.getLogger("msgstream.backends.pulsar.library")
library.addHandler(handler)
LEVEL = sys.argv[3]
if LEVEL != "default":
    library.setLevel(LEVEL)

def config():
    return config_from_dict(
        {
            "mq": {"type": "pulsar"},
            "pulsar": {"address": sys.argv[1], "admin_url": sys.argv[2]},
            "msgstream": {"operation_timeout_s": 5},
        },
        env={},
    )
"""

ROUND_TRIP = """
async def main():
    channel = sys.argv[4]
    async with new_msgstream(config()) as producer:
        await producer.as_producer([channel])
        for i in range(20):
            row = FieldData("pk", DataType.INT64, [i])
            insert = InsertMsg(
                msg_id=i, timestamp=i + 1, collection_name="c", row_ids=[i], fields=[row],
                hash_keys=[0],
            )
            await producer.produce(MsgPack.of(insert))
    async with new_msgstream(config()) as consumer:
        await consumer.as_consumer([channel], "exit-test", SubscriptionPosition.EARLIEST)
        ids = []
        while len(ids) < 20:
            pack = await asyncio.wait_for(anext(consumer), 20)
            ids += [row for msg in pack.msgs for row in msg.row_ids.tolist()]
            await consumer.ack(pack)
    print("received", ids)

asyncio.run(main())
"""

UNREACHABLE = """
from msgstream import BackendUnavailableError

async def main():
    async with new_msgstream(config()) as stream:
        try:
            await stream.as_producer(["nowhere"])
        except BackendUnavailableError:
            print("unavailable")

asyncio.run(main())
"""


def run_program(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / f"program-{abs(hash(args))}.py"
    script.write_text(textwrap.dedent(PROGRAM_HEAD) + textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_programs_exit_cleanly_after_closing_their_streams(
    tmp_path: Path, pulsar_broker: Any
) -> None:
    """Before the library stopped holding Python objects on its threads, about one such
    process in thirty aborted at exit ("terminate called without an active exception")
    or died of a segmentation fault, after all its work; more often on a loaded machine,
    so four run at a time. (Forty such runs caught the old code about every other time.)"""
    urls = (pulsar_broker.service_url, pulsar_broker.admin_url, "default")
    runs = 40
    with ThreadPoolExecutor(4) as pool:
        done = list(
            pool.map(
                lambda n: run_program(tmp_path, ROUND_TRIP, *urls, f"exit-{n}-{free_port()}"),
                range(runs),
            )
        )
    expected = f"received {list(range(20))}\n"
    outcomes = [(d.returncode, d.stdout, d.stderr) for d in done]
    assert outcomes == [(0, expected, "")] * runs


def test_library_lines_reach_python_logging_at_the_configured_level(
    tmp_path: Path, pulsar_broker: Any
) -> None:
    urls = (pulsar_broker.service_url, pulsar_broker.admin_url)
    channel = f"log-{free_port()}"
    done = run_program(tmp_path, ROUND_TRIP, *urls, "INFO", channel)
    assert (done.returncode, done.stdout) == (0, f"received {list(range(20))}\n")
    lines = done.stderr.splitlines()
    assert lines, "no library line logged at INFO"
    prefix = "msgstream.backends.pulsar.library INFO pulsar | "
    assert [line for line in lines if not line.startswith(prefix)] == []
    created = f"[persistent://public/default/{channel}, ] Created producer on broker"
    assert any(line.startswith(prefix + "ProducerImpl:") and created in line for line in lines)
    assert any("Closing Pulsar client" in line for line in lines)


def test_library_errors_are_logged_and_nothing_else_by_default(tmp_path: Path) -> None:
    address = f"pulsar://127.0.0.1:{free_port()}"
    done = run_program(tmp_path, UNREACHABLE, address, "http://127.0.0.1:1", "default")
    assert (done.returncode, done.stdout) == (0, "unavailable\n")
    lines = done.stderr.splitlines()
    assert lines, "the refused connections were not logged"
    error = "msgstream.backends.pulsar.library ERROR pulsar | "
    assert [line for line in lines if not line.startswith(error)] == []
    refused = f"ClientConnection:485 | [<none> -> {address}] Failed to establish connection"
    assert any(line.startswith(error + refused) for line in lines), lines
