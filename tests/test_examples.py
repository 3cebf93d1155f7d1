"""The programs in ``examples/`` run as a user runs them (a subprocess each) and do what
their docstrings say: on rocksmq, Kafka and Pulsar, with Spark, and under SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.lines import Lines

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
ROWS_PER_INSERT = 5
DRAINED_AFTER_S = "5"
"""The consumer's ``--idle-timeout`` where it is to stop once it has read everything: every
pack is already stored, so the next one is a local read away; the margin is for a loaded
machine (the idle time counts only while no pack is being handled)."""


def run(program: str, *args: str, env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / program), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{program} exited {done.returncode}:\n{done.stderr}"
    return done.stdout


def environment(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSGSTREAM_")}
    return {**env, **overrides}


def produce_then_consume_twice(tmp_path: Path, env: dict[str, str], *config: str) -> None:
    """60 inserts (300 orders); a consumer stops after 2 packs with orders in them (a tick
    can close a pack with none: the schema's, or one a slow send let pass), a second one
    resumes from its checkpoint: together they handle every order exactly once. They read a
    pack per tick however late they start: pursuit mode, which a lag past 10 s turns on (a
    loaded machine starting an interpreter), would merge the packs into two or fewer."""
    env = {**env, "MSGSTREAM_MSGSTREAM_PURSUIT_LAG_S": "0"}
    produced = run("producer_service.py", *config, "--count", "60", "--every", "0.01", env=env)
    assert produced.strip() == "produced inserts=60 rows=300 stopped_by=None"
    out, positions = tmp_path / "orders.txt", tmp_path / "positions.json"
    files = ["--out", str(out), "--positions", str(positions)]
    first = run("checkpointing_consumer.py", *config, *files, "--max-packs", "2",
                "--idle-timeout", "60", env=env)  # fmt: skip
    assert first.startswith("consumed orders=") and "packs=2 " in first
    handled_first = len(out.read_text().split())
    assert 0 < handled_first < 300
    rest = run("checkpointing_consumer.py", *config, *files, "--idle-timeout", DRAINED_AFTER_S,
               env=env)  # fmt: skip
    assert f"consumed orders={300 - handled_first} " in rest
    assert sorted(int(line) for line in out.read_text().split()) == list(range(300))


def test_producer_and_checkpointing_consumer_on_rocksmq(tmp_path: Path) -> None:
    env = environment(MSGSTREAM_ROCKSMQ_PATH=str(tmp_path / "store"))
    produce_then_consume_twice(tmp_path, env)


def test_sigterm_stops_the_producer_after_a_whole_insert_and_a_final_tick(
    tmp_path: Path,
) -> None:
    env = environment(MSGSTREAM_ROCKSMQ_PATH=str(tmp_path / "store"))
    producer = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "producer_service.py"), "--count", "100000",
         "--every", "0.005"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        stdout, stderr = Lines(producer.stdout), Lines(producer.stderr)  # type: ignore[arg-type]
        stderr.wait_for(lambda line: line.startswith("producing to "))  # an insert is sent
        producer.send_signal(signal.SIGTERM)
        producer.wait(timeout=120)
        out, err = stdout.rest(), stderr.rest()
    finally:
        producer.kill()
        producer.wait()
    assert producer.returncode == 143, err
    inserts = int(out.split("inserts=")[1].split()[0])
    assert 0 < inserts < 100000
    assert out.strip().endswith("stopped_by=SIGTERM")
    # the final tick was sent: a consumer reads every insert the producer reported
    files = ["--out", str(tmp_path / "o.txt"), "--positions", str(tmp_path / "p.json")]
    consumed = run("checkpointing_consumer.py", *files, "--idle-timeout", DRAINED_AFTER_S, env=env)
    assert f"consumed orders={inserts * ROWS_PER_INSERT} " in consumed


@pytest.mark.kafka
def test_the_same_programs_on_kafka(tmp_path: Path, kafka_broker: Any) -> None:
    env = environment(MSGSTREAM_KAFKA_BROKERS=kafka_broker.bootstrap)
    produce_then_consume_twice(tmp_path, env, "--config", str(EXAMPLES / "kafka.yaml"))


@pytest.mark.pulsar
def test_the_same_programs_on_pulsar(tmp_path: Path, pulsar_broker: Any) -> None:
    env = environment(
        MSGSTREAM_PULSAR_ADDRESS=pulsar_broker.service_url,
        MSGSTREAM_PULSAR_ADMIN_URL=pulsar_broker.admin_url,
    )
    produce_then_consume_twice(tmp_path, env, "--config", str(EXAMPLES / "pulsar.yaml"))


@pytest.mark.parametrize("program", ["producer_service.py", "checkpointing_consumer.py"])
@pytest.mark.parametrize("broker", ["kafka", "pulsar"])
def test_no_broker_answering_ends_the_program_with_one_error_line(
    tmp_path: Path, broker: str, program: str
) -> None:
    """What a user sees who runs an example before starting the broker: one line naming
    the address, no traceback, no line per connection attempt, a non-zero exit."""
    with socket.socket() as refusing:  # bound, never listening: connections are refused
        refusing.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{refusing.getsockname()[1]}"
        env = environment(
            MSGSTREAM_KAFKA_BROKERS=address,
            MSGSTREAM_PULSAR_ADDRESS=f"pulsar://{address}",
            MSGSTREAM_PULSAR_ADMIN_URL=f"http://{address}",
            MSGSTREAM_MSGSTREAM_OPERATION_TIMEOUT_S="3",  # Pulsar retries until then
        )
        args = ["--out", str(tmp_path / "o.txt"), "--positions", str(tmp_path / "p.json")]
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / program), "--config", str(EXAMPLES / f"{broker}.yaml"),
             *(args if program == "checkpointing_consumer.py" else [])],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {broker}")
    assert address in line


def test_the_local_brokers_the_examples_readme_names_exist() -> None:
    """``make broker-kafka`` runs ``python -m tests.brokers kafka``: from the repository's
    root it answers --help and offers both brokers (starting one is the tests' job)."""
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    assert "make broker-kafka" in readme and "python -m tests.brokers kafka" in readme
    for broker in ("kafka", "pulsar"):
        planned = subprocess.run(
            ["make", "-n", "--no-print-directory", f"broker-{broker}"],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert planned.returncode == 0, planned.stderr
        assert f"/python -m tests.brokers {broker}\n" in planned.stdout
    done = subprocess.run(
        [sys.executable, "-m", "tests.brokers", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "{kafka,pulsar}" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "tests.brokers", "rabbitmq"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "invalid choice: 'rabbitmq'" in bad.stderr


@pytest.mark.spark
@pytest.mark.slow
def test_spark_ingest_writes_every_order_once_across_runs(tmp_path: Path) -> None:
    """Each run of the job starts a Spark JVM of its own, set up for a short life as the
    demo's is (``SPARK_SUBMIT_OPTS``: JIT settings only, nothing the job sees)."""
    from msgstream.bridge_spark.session import SHORT_RUN_CONF

    env = environment(
        MSGSTREAM_ROCKSMQ_PATH=str(tmp_path / "store"),
        SPARK_SUBMIT_OPTS=SHORT_RUN_CONF["spark.driver.extraJavaOptions"],
    )
    run("producer_service.py", "--count", "20", env=env)
    job = ["--out", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "job.json")]
    assert "ingested batches=1 rows=100 parquet_rows=100" in run("spark_ingest.py", *job, env=env)
    run("producer_service.py", "--count", "20", env=env)  # more orders, then the job again
    again = run("spark_ingest.py", *job, env=env)
    assert "rows=100 parquet_rows=200" in again
