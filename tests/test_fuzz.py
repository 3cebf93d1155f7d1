"""The fuzzers of tests/fuzzing.py, with a fixed seed and a size that fits CI.

``make fuzz`` runs the same fuzzers longer (``FUZZ_ITERATIONS``, ``FUZZ_SEED``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

import fuzzing
from msgstream.errors import DecodeError

CI_DECODE_PAYLOADS = 50_000
"""Payloads through ``decode`` (and ``decode_batch``) in CI."""
CI_DOCUMENTS = 2_500
"""Positions JSON texts, and config documents, in CI."""


def _no_findings(report: fuzzing.Report, inputs: int) -> None:
    assert report.inputs == inputs
    # Both verdicts must occur, or the fuzzer has stopped reaching the parsers' insides.
    assert report.accepted > inputs // 100
    assert report.rejected > inputs // 100
    assert report.failures == 0, "\n\n".join(map(str, report.findings))


@pytest.mark.slow
def test_decode_raises_nothing_but_decode_error() -> None:
    rng = random.Random(fuzzing.DEFAULT_SEED)
    _no_findings(fuzzing.fuzz_decode(rng, CI_DECODE_PAYLOADS), CI_DECODE_PAYLOADS)


@pytest.mark.slow
def test_positions_from_json_raises_nothing_but_invalid_position_error() -> None:
    rng = random.Random(fuzzing.DEFAULT_SEED + 1)
    _no_findings(fuzzing.fuzz_positions(rng, CI_DOCUMENTS), CI_DOCUMENTS)


@pytest.mark.slow
def test_config_raises_nothing_but_config_error(tmp_path: Path) -> None:
    rng = random.Random(fuzzing.DEFAULT_SEED + 2)
    _no_findings(fuzzing.fuzz_config(rng, CI_DOCUMENTS, tmp_path), CI_DOCUMENTS)


def test_the_decode_fuzzer_reports_what_it_should_not_see(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fuzzer can fail: a decode that raises KeyError on time ticks is caught."""
    real = fuzzing.decode

    def broken(data: bytes, *args: Any) -> Any:
        msg = real(data, *args)
        if msg.MSG_TYPE == 1:
            raise KeyError("tick")
        return msg

    monkeypatch.setattr(fuzzing, "decode", broken)
    report = fuzzing.fuzz_decode(random.Random(3), 3000)
    assert report.failures > 0
    assert report.findings[0].target == "decode"
    assert report.findings[0].error.startswith("KeyError at ")
    assert isinstance(report.findings[0].data, bytes)


def test_every_corpus_payload_decodes_and_mutations_reach_the_body_checks() -> None:
    for payload in fuzzing.CORPUS:
        fuzzing.decode(payload, fuzzing.REGISTRY)
    messages = set()
    rng = random.Random(5)
    for _ in range(2000):
        try:
            fuzzing.decode(fuzzing.mutated_payload(rng), fuzzing.REGISTRY)
        except DecodeError as exc:
            messages.add(str(exc).split(":")[0])
    # Not only checksum and envelope errors: bodies of every kind are rejected too.
    assert "checksum mismatch (corrupt or truncated payload)" in messages
    assert {"InsertMsg body is malformed", "DeleteMsg body is malformed"} <= messages
