"""Spark's own Kafka source (``spark-sql-kafka-0-10``) from Maven Central, for baselines.

PySpark bundles no Kafka connector. The newest release that resolves is used: PySpark's
own version first, then earlier releases of the same major version, newest first (the
connector's API is stable within a major, so e.g. 4.2.0 runs under PySpark 4.3.0). Only
the main artifact and its compile/runtime dependencies are resolved, never test scope.
"""

from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from report import tests_on_path

GROUP = "org.apache.spark"
ARTIFACT = "spark-sql-kafka-0-10_2.13"
METADATA_URL = (
    f"https://repo1.maven.org/maven2/{GROUP.replace('.', '/')}/{ARTIFACT}/maven-metadata.xml"
)


@dataclass(frozen=True)
class Connector:
    """The jars to add to ``spark.jars`` (empty: none resolved) and what was chosen."""

    jars: list[str]
    coordinate: str
    note: str
    """Which versions were tried and why they were passed over; or why none works."""


def _release(version: str) -> tuple[int, ...] | None:
    """``(4, 2, 0)`` for a plain release, None for previews and other qualifiers."""
    return (
        tuple(int(p) for p in version.split(".")) if re.fullmatch(r"\d+(\.\d+)*", version) else None
    )


def candidate_versions(pyspark_version: str, published: list[str] | None) -> list[str]:
    """PySpark's version, then the same major's earlier published releases, newest first.

    ``published`` is Maven Central's version list (None: unknown, then only PySpark's own
    version is tried)."""
    own = _release(pyspark_version)
    if published is None or own is None:
        return [pyspark_version]
    releases = {v: _release(v) for v in published}
    older = [v for v, r in releases.items() if r is not None and r[0] == own[0] and r <= own]
    return sorted(older, key=lambda v: releases[v] or (), reverse=True)


def published_versions() -> list[str] | None:
    try:
        with urllib.request.urlopen(METADATA_URL, timeout=30) as response:
            text = response.read().decode()
    except OSError:
        return None
    return re.findall(r"<version>([^<]+)</version>", text)


def resolve(pyspark_version: str, pyspark_jars: Path) -> Connector:
    """The newest usable connector, minus the jars PySpark already ships."""
    tests_on_path()
    from brokers.maven import MavenResolveError, resolve_classpath

    published = published_versions()
    passed: list[str] = []
    if published is not None and pyspark_version not in published:
        passed.append(f"{pyspark_version} is not on Maven Central")
    for version in candidate_versions(pyspark_version, published):
        coordinate = f"{GROUP}:{ARTIFACT}:{version}"
        try:
            jars = resolve_classpath("spark-sql-kafka", [coordinate])
        except MavenResolveError as exc:
            passed.append(f"{version}: {_first_error(str(exc))}")
            continue
        bundled = {_artifact_name(p.name) for p in pyspark_jars.iterdir()}
        kept = [str(j) for j in jars if _artifact_name(j.name) not in bundled]
        return Connector(kept, coordinate, "; ".join(passed))
    if published is None:
        passed.append("Maven Central's version list could not be read")
    return Connector([], "", "; ".join(passed) or "no release of this major version")


def _first_error(text: str) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    line = next((ln for ln in text.splitlines() if "Could not" in ln), text[:300])
    return line.split("pom:0: ", 1)[-1].split(" -> [Help", 1)[0].strip()


def _artifact_name(jar: str) -> str:
    match = re.match(r"^(.*?)-\d[\w.+-]*\.jar$", jar)
    return match.group(1) if match else jar
