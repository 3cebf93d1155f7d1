"""Spark's Python workers import the installed PySpark, not the zip Spark puts first on
their path, and do not have Spark's core jar on it (``bridge_spark.process.launcher``): the
launcher drops exactly those entries, keeps every other entry in order, and drops the zip
only when it repeats the installed release, the jar only when it holds no Python."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import zipfile
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from msgstream.bridge_spark.process import launcher as module
from msgstream.bridge_spark.process.launcher import (
    installed_pyspark_zip,
    launcher_script,
    moduleless_spark_jar,
    worker_python,
)
from spark.probes import probe_query

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ZIP = installed_pyspark_zip()
JAR = moduleless_spark_jar()


def path_seen_by(launcher: str, pythonpath: str | None) -> str | None:
    """PYTHONPATH as the interpreter started by ``launcher`` sees it (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    probe = "import os; print(repr(os.environ.get('PYTHONPATH')))"
    done = subprocess.run(
        [launcher, "-c", probe], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    value: str | None = eval(done.stdout)  # repr of a str or None
    return value


@pytest.fixture
def launcher(tmp_path: Path) -> str:
    assert ZIP is not None, "the dev install has PySpark from pip, with its zip"
    assert JAR is not None, "... and its core jar"
    made = worker_python(cache_dir=tmp_path / "cache")
    assert made != sys.executable
    assert Path(made).parent == tmp_path / "cache"
    return made


@pytest.mark.parametrize(
    ("given", "seen"),
    [
        ("{zip}:/a b:/c", "/a b:/c"),
        ("/x:{zip}:/y", "/x:/y"),
        ("{zip}", None),
        ("{zip}:/a:{jar}", "/a"),  # Spark's own order: the zip first, the jar last
        ("{jar}:/b:{zip}:/c", "/b:/c"),
        ("{jar}", None),
        ("/a::{zip}:/b", "/a::/b"),  # an empty entry (the working directory) is kept
        ("/only/this", "/only/this"),
        ("/*", "/*"),  # not globbed
        ("", None),
        (None, None),
    ],
)
def test_the_launcher_drops_the_zip_and_the_jar_and_keeps_every_other_entry(
    launcher: str, given: str | None, seen: str | None
) -> None:
    pythonpath = None if given is None else given.format(zip=ZIP, jar=JAR)
    assert path_seen_by(launcher, pythonpath) == seen


def test_the_zip_is_recognised_by_any_path_that_reaches_it(launcher: str, tmp_path: Path) -> None:
    assert ZIP is not None
    link = tmp_path / "link.zip"
    link.symlink_to(ZIP)
    roundabout = f"{ZIP.parent}/../lib/{ZIP.name}"
    assert path_seen_by(launcher, f"{link}:{roundabout}:/kept") == "/kept"


def test_the_dev_installs_core_jar_is_spark_core_inside_pyspark() -> None:
    import pyspark

    assert JAR is not None
    assert JAR.parent == Path(pyspark.__file__).parent / "jars"
    assert JAR.name.startswith("spark-core_") and JAR.suffix == ".jar"


def test_a_launcher_needs_something_to_leave_out() -> None:
    with pytest.raises(ValueError, match="no archive to leave out"):
        launcher_script(sys.executable, [])


def test_the_launcher_runs_the_given_interpreter_with_its_arguments(launcher: str) -> None:
    done = subprocess.run(
        [launcher, "-c", "import sys; print(sys.executable, sys.argv[1:])", "a", "b c"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == f"{sys.executable} ['a', 'b c']"


def test_the_launcher_is_written_once_and_mended_when_changed(tmp_path: Path) -> None:
    first = Path(worker_python(cache_dir=tmp_path))
    written = first.stat().st_mtime_ns
    assert Path(worker_python(cache_dir=tmp_path)).stat().st_mtime_ns == written
    first.write_text("#!/bin/sh\nexit 3\n")
    again = Path(worker_python(cache_dir=tmp_path))
    assert again == first
    assert again.read_text().startswith("#!/bin/sh\n# Written by msgstream")
    assert os.access(again, os.X_OK)
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no draft left behind


def test_a_path_name_with_quotes_and_spaces_survives(tmp_path: Path) -> None:
    odd = tmp_path / "it's a dir"
    odd.mkdir()
    python = odd / "python"
    python.symlink_to(sys.executable)
    made = worker_python(str(python), cache_dir=tmp_path / "cache")
    done = subprocess.run(
        [made, "-c", "print('ran')"], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout == "ran\n"


@pytest.fixture
def fake_pyspark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PySpark package at ``tmp_path/pyspark`` that ``find_spec`` returns."""
    package = tmp_path / "pyspark"
    (package / "python" / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "version.py").write_text('__version__: str = "4.3.0"\n')
    spec = ModuleSpec("pyspark", None, origin=str(package / "__init__.py"))
    monkeypatch.setattr(module, "find_spec", lambda name: spec if name == "pyspark" else None)
    return package


def zip_with_version(package: Path, text: str) -> None:
    with zipfile.ZipFile(package / "python" / "lib" / "pyspark.zip", "w") as archive:
        archive.writestr("pyspark/version.py", text)


def test_a_zip_of_another_release_is_left_alone(fake_pyspark: Path, tmp_path: Path) -> None:
    zip_with_version(fake_pyspark, '__version__: str = "4.2.0"\n')
    assert installed_pyspark_zip() is None
    assert worker_python(sys.executable, cache_dir=tmp_path / "cache", warm=False) == (
        sys.executable
    )
    assert not (tmp_path / "cache").exists()


def core_jar(package: Path, name: str = "spark-core_2.13-4.3.0.jar", *entries: str) -> Path:
    (package / "jars").mkdir(exist_ok=True)
    jar = package / "jars" / name
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        archive.writestr("org/apache/spark/SparkContext.class", b"\xca\xfe\xba\xbe")
        for entry in entries:
            archive.writestr(entry, "")
    return jar


def test_a_core_jar_without_python_is_left_out(fake_pyspark: Path, tmp_path: Path) -> None:
    jar = core_jar(fake_pyspark)
    assert moduleless_spark_jar() == jar
    made = worker_python(sys.executable, cache_dir=tmp_path / "cache")  # no zip: the jar only
    assert path_seen_by(made, f"/a:{jar}") == "/a"


@pytest.mark.parametrize("entry", ["pyspark/__init__.py", "lib/mod.pyc"])
def test_a_core_jar_with_python_in_it_stays(fake_pyspark: Path, entry: str) -> None:
    core_jar(fake_pyspark, "spark-core_2.13-4.3.0.jar", entry)
    assert moduleless_spark_jar() is None


def test_no_single_readable_core_jar_stays(fake_pyspark: Path) -> None:
    assert moduleless_spark_jar() is None  # none
    core_jar(fake_pyspark, "spark-core_2.13-4.3.0.jar")
    core_jar(fake_pyspark, "spark-core_2.12-4.3.0.jar")
    assert moduleless_spark_jar() is None  # two: which one Spark appends is not known
    for jar in (fake_pyspark / "jars").iterdir():
        jar.unlink()
    (fake_pyspark / "jars" / "spark-core_2.13-4.3.0.jar").write_bytes(b"not a zip")
    assert moduleless_spark_jar() is None


def test_the_same_release_is_left_out(fake_pyspark: Path) -> None:
    zip_with_version(fake_pyspark, '__version__: str = "4.3.0"\n')
    assert installed_pyspark_zip() == fake_pyspark / "python" / "lib" / "pyspark.zip"


def test_a_pyspark_without_its_zip_or_jar_keeps_the_interpreter(
    fake_pyspark: Path, tmp_path: Path
) -> None:
    assert installed_pyspark_zip() is None  # a PySpark without python/lib/pyspark.zip
    assert moduleless_spark_jar() is None  # ... and without jars/
    assert worker_python(sys.executable, cache_dir=tmp_path / "c", warm=False) == sys.executable
    warm = worker_python(sys.executable, cache_dir=tmp_path / "c")  # the warm client only
    assert Path(warm).parent == tmp_path / "c"
    assert "archive0" not in Path(warm).read_text()
    assert path_seen_by(warm, "/a:/b") == "/a:/b"


def test_an_unwritable_cache_keeps_the_interpreter_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with caplog.at_level(logging.WARNING, logger="msgstream.bridge_spark.launcher"):
        assert worker_python(sys.executable, cache_dir=blocker / "cache") == (sys.executable)
    [record] = caplog.records
    assert ZIP is not None and JAR is not None
    assert "workers start without msgstream's launcher" in record.getMessage()
    assert str(blocker / "cache") in record.getMessage()


def test_an_interpreter_that_is_not_executable_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"worker_python: '/no/such/python' is not an executable"):
        worker_python("/no/such/python", cache_dir=tmp_path)
    plain = tmp_path / "python"
    plain.write_text("")
    with pytest.raises(ValueError, match="is not an executable file"):
        worker_python(str(plain), cache_dir=tmp_path)


def test_no_home_directory_keeps_the_interpreter(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", "not-absolute")
    with caplog.at_level(logging.WARNING, logger="msgstream.bridge_spark.launcher"):
        assert worker_python(sys.executable) == sys.executable
    [record] = caplog.records
    assert "'not-absolute/.cache' is not an absolute path" in record.getMessage()


def test_the_cache_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    made = Path(worker_python())
    assert made.parent == tmp_path / "msgstream" / "worker-python"


@pytest.mark.spark
def test_a_streaming_query_runner_and_its_workers_import_the_installed_pyspark(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The runner of a Python streaming source (a new process per query) and the
    executors' workers report where they imported PySpark from (not the zip) and the
    archives on their path (not Spark's core jar: only py4j's zip is left; Python's own
    ``python311.zip`` entry names no file here)."""

    def origin() -> str:
        import os
        import sys

        import pyspark

        archives = sorted(os.path.basename(p) for p in sys.path if os.path.isfile(p))
        return f"{pyspark.__file__} {archives}"

    row = probe_query(spark, tmp_path / "checkpoint", "pyspark_origin", origin, origin)
    import pyspark

    py4j_zip = next(Path(pyspark.__file__).parent.glob("python/lib/py4j-*-src.zip"))
    expected = f"{pyspark.__file__} {[py4j_zip.name]}"
    assert (row["runner"], row["worker"]) == (expected, expected)
