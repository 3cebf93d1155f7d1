"""Read-only rocksmq stores' secondary directories: removed when the store closes, and,
when its process died without closing, by the next read-only open in another process
(:mod:`msgstream.backends.rocksmq.secondary`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from msgstream.backends.rocksmq import RocksOptions, RocksStore
from msgstream.backends.rocksmq.secondary import LOCK, PREFIX, sweep

READER = textwrap.dedent(
    """
    import sys
    from msgstream.backends.rocksmq import RocksOptions, RocksStore
    store = RocksStore(sys.argv[1], RocksOptions(read_only=True))
    print("OPENED", flush=True)
    sys.stdin.readline()
    store.close()
    """
)


def secondary_dirs(root: Path) -> set[str]:
    return {entry.name for entry in root.iterdir() if entry.name.startswith(PREFIX)}


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = tmp_path / "store"
    RocksStore(str(path)).close()
    return str(path)


class Reader:
    """A process with ``store`` open read-only, its temporary directory ``root``."""

    def __init__(self, store: str, root: Path) -> None:
        before = secondary_dirs(root)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", READER, store],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "TMPDIR": str(root)},
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == "OPENED\n"
        (self.dir,) = secondary_dirs(root) - before

    def close(self) -> None:
        self.proc.communicate("\n", timeout=30)
        assert self.proc.returncode == 0

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=30)


def test_a_killed_readers_directory_goes_with_the_next_open_a_live_ones_stays(
    store: str, tmp_path: Path
) -> None:
    root = tmp_path / "tmp"
    root.mkdir()
    older = root / f"{PREFIX}older-version"  # no lock file: not known to be abandoned
    older.mkdir()
    (older / "LOG").write_text("")
    killed, live = Reader(store, root), Reader(store, root)
    assert (root / killed.dir / LOCK).exists()
    killed.kill()
    assert secondary_dirs(root) == {older.name, killed.dir, live.dir}

    later = Reader(store, root)  # its open sweeps
    assert secondary_dirs(root) == {older.name, live.dir, later.dir}
    live.close()
    later.close()
    assert secondary_dirs(root) == {older.name}


def test_a_process_sweeps_once_and_only_free_directories(store: str, tmp_path: Path) -> None:
    root = tmp_path / "tmp"
    root.mkdir()
    live = Reader(store, root)
    try:
        killed = Reader(store, root)
        killed.kill()
        assert sweep(str(root)) == [killed.dir]
        assert secondary_dirs(root) == {live.dir}
        again = Reader(store, root)
        again.kill()
        assert sweep(str(root)) == []  # swept once already in this process
        assert secondary_dirs(root) == {live.dir, again.dir}
    finally:
        live.close()


def test_closing_a_read_only_store_removes_its_directory(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    reader = RocksStore(store, RocksOptions(read_only=True))
    (name,) = secondary_dirs(root)
    assert {p.name for p in (root / name).iterdir()} >= {LOCK, "LOG"}
    reader.close()
    assert secondary_dirs(root) == set()
