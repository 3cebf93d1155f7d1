"""One of the test suite's local brokers, for your own use (the examples, say), no Docker
needed: ``python -m tests.brokers kafka`` (or ``pulsar``) from the repository's root with
the dev install, or ``make broker-kafka`` / ``make broker-pulsar``.

It starts the broker the tests start when no Docker daemon answers (a JVM from jars
fetched from Maven Central, so it needs Java 17 and Maven), prints the environment
variables that point msgstream at it, serves until Ctrl-C or SIGTERM, then stops it. Its
ports are free ones picked at start; its data lives in a temporary directory removed on
exit, unless ``--workdir`` names one to keep.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from .jvm import JvmBroker


def _kafka(workdir: Path) -> tuple[JvmBroker, dict[str, str]]:
    from .kafka import KAFKA_VERSION, LocalKafka

    broker = LocalKafka(workdir, short_lived=False)
    return broker, {
        "what": f"Apache Kafka {KAFKA_VERSION}",
        "MSGSTREAM_KAFKA_BROKERS": broker.bootstrap,
    }


def _pulsar(workdir: Path) -> tuple[JvmBroker, dict[str, str]]:
    from .pulsar import PULSAR_VERSION, LocalPulsar

    broker = LocalPulsar(workdir, short_lived=False)
    return broker, {
        "what": f"Apache Pulsar {PULSAR_VERSION} standalone",
        "MSGSTREAM_PULSAR_ADDRESS": broker.service_url,
        "MSGSTREAM_PULSAR_ADMIN_URL": broker.admin_url,
    }


BROKERS = {"kafka": _kafka, "pulsar": _pulsar}


class _Stopped(Exception):
    """Ctrl-C or SIGTERM arrived (raised by the handler, so the broker is stopped below)."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.brokers",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("broker", choices=sorted(BROKERS), help="which broker to run")
    parser.add_argument("--workdir", type=Path, help="keep the broker's data here")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"msgstream-{args.broker}-"))
    broker, described = BROKERS[args.broker](workdir)
    what = described.pop("what")
    # Handlers, not a blocked signal mask: the broker's JVM would inherit the mask and
    # then ignore the SIGTERM that stops it.
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, _stop)
    try:
        print(f"starting {what} under {workdir} ...", flush=True)
        broker.start()
        print(f"{what} is up; point msgstream at it with:", flush=True)
        for name, value in described.items():
            print(f"export {name}={value}", flush=True)
        print("Ctrl-C stops it.", flush=True)
        while True:
            signal.pause()  # until a signal: its handler raises _Stopped
    except _Stopped as stopped:
        print(f"{stopped}: stopping", flush=True)
    except Exception as exc:  # the broker did not start: why, with its log's tail
        print(f"error: {what} did not start: {exc}", file=sys.stderr)
        return 1
    finally:
        broker.stop()
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
