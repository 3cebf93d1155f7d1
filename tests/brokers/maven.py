"""Resolve a Java program's jars from Maven Central into a cached directory.

The brokers the tests run (Apache Kafka, Apache Pulsar) are plain JVM programs published
on Maven Central. Rather than downloading release tarballs, a throw-away pom lists the
artifacts and ``maven-dependency-plugin`` copies them and everything they depend on into
one directory, which becomes the classpath. The directory is keyed by the artifact list,
so a second run reuses it without touching the network.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

DEPENDENCY_PLUGIN_VERSION = "3.8.1"
"""Pinned so a new plugin release cannot change what a cached run resolves."""


class MavenResolveError(RuntimeError):
    """Maven could not resolve the requested artifacts."""


def cache_root() -> Path:
    """Where resolved classpaths live: ``$MSGSTREAM_TEST_CACHE`` or ``~/.cache/msgstream``."""
    configured = os.environ.get("MSGSTREAM_TEST_CACHE")
    base = Path(configured) if configured else Path.home() / ".cache" / "msgstream"
    return base / "jvm"


def _pom(artifacts: Sequence[str], exclusions: Sequence[str]) -> str:
    deps = []
    excl = "".join(
        f"<exclusion><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId></exclusion>"
        for g, a in (e.split(":") for e in exclusions)
    )
    for coordinate in artifacts:
        group, artifact, version = coordinate.split(":")
        deps.append(
            f"<dependency><groupId>{escape(group)}</groupId>"
            f"<artifactId>{escape(artifact)}</artifactId><version>{escape(version)}</version>"
            f"<exclusions>{excl}</exclusions></dependency>"
        )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.msgstream.tests</groupId>
  <artifactId>broker-classpath</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>{"".join(deps)}</dependencies>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId>
    <artifactId>maven-dependency-plugin</artifactId>
    <version>{DEPENDENCY_PLUGIN_VERSION}</version>
  </plugin></plugins></build>
</project>
"""


def resolve_classpath(
    name: str, artifacts: Sequence[str], exclusions: Sequence[str] = ()
) -> list[Path]:
    """Return the jars of ``artifacts`` ("group:artifact:version") and their dependencies.

    ``exclusions`` ("group:artifact") are dropped from every artifact's dependency tree
    (for example a logging binding that would clash with the one we add).
    """
    if shutil.which("mvn") is None:
        raise MavenResolveError("mvn is not on PATH; install Maven 3.8+ to run broker tests")
    key = hashlib.sha256("\n".join([*artifacts, "--", *exclusions]).encode()).hexdigest()[:16]
    target = cache_root() / f"{name}-{key}"
    done = target / ".complete"
    if not done.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{name}-pom-") as work:
            pom = Path(work) / "pom.xml"
            pom.write_text(_pom(artifacts, exclusions))
            staging = Path(work) / "lib"
            result = subprocess.run(
                [
                    "mvn",
                    "-B",
                    "-q",
                    "-f",
                    str(pom),
                    f"org.apache.maven.plugins:maven-dependency-plugin:"
                    f"{DEPENDENCY_PLUGIN_VERSION}:copy-dependencies",
                    "-DincludeScope=runtime",
                    f"-DoutputDirectory={staging}",
                ],
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
            if result.returncode != 0:
                raise MavenResolveError(
                    f"resolving {name} ({', '.join(artifacts)}) failed:\n"
                    f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
                )
            shutil.rmtree(target, ignore_errors=True)
            shutil.move(str(staging), str(target))
        done.touch()
    return sorted(p for p in target.iterdir() if p.suffix == ".jar")
