"""``tools/test_summary.py``, the last lines of ``make test``: each lane's outcome and
what failed in it, from logs shaped like the real ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "test_summary.py"

PASSED = """\
........................................................................ [ 97%]
........                                                                 [100%]
============================= slowest 10 durations =============================
20.17s setup    tests/conformance/test_backend_contract.py::test_earliest[pulsar]
368 passed, 1977 deselected in 266.76s (0:04:26)
%3|1795921116.309|FAIL|msgstream#producer-213| [thrd:...]: Connect failed
"""

TWO_RUNS = """\
All checks passed!
Success: no issues found in 331 source files
FAILED tests/test_rocksmq_shared.py::test_the_owner_killed - assert (None is not None)
1 failed, 1919 passed, 425 deselected in 323.18s (0:05:23)
make[1]: *** [Makefile:130: test-py313] Error 1
"""

INTERNAL = "\n".join(
    [
        f"FAILED tests/conformance/test_msgstream.py::test_{n}[pulsar] - TimeoutError"
        for n in range(8)
    ]
    + [
        'INTERNALERROR>   File "/x/ast.py", line 50, in parse',
        "INTERNALERROR> SystemError: AST constructor recursion depth mismatch "
        "(before=129, after=177)",
        "",
        "47 failed, 122 passed, 1977 deselected, 1 warning, 1 error in 1562.45s (0:26:02)",
        "make[1]: *** [Makefile:89: test-brokers] Error 3",
    ]
)


def test_each_lane_says_its_outcome_and_names_its_failures(tmp_path: Path) -> None:
    logs = {"passed.log": PASSED, "two.log": TWO_RUNS, "internal.log": INTERNAL}
    for name, text in logs.items():
        (tmp_path / name).write_text(text)
    args = [f"{name.split('.')[0]}={tmp_path / name}" for name in logs]
    out = subprocess.run(
        [sys.executable, str(TOOL), *args, f"gone={tmp_path / 'gone.log'}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines() == [
        "===== summary",
        f"passed ({tmp_path / 'passed.log'}): 368 passed, 1977 deselected in 266.76s (0:04:26)",
        f"two ({tmp_path / 'two.log'}): 1 failed, 1919 passed, 425 deselected in 323.18s (0:05:23)",
        "  FAILED tests/test_rocksmq_shared.py::test_the_owner_killed - assert (None is not None)",
        "  make[1]: *** [Makefile:130: test-py313] Error 1",
        f"internal ({tmp_path / 'internal.log'}): 47 failed, 122 passed, 1977 deselected, "
        "1 warning, 1 error in 1562.45s (0:26:02)",
        "  INTERNALERROR> SystemError: AST constructor recursion depth mismatch (before=129, "
        "after=177)",
        *[
            f"  FAILED tests/conformance/test_msgstream.py::test_{n}[pulsar] - TimeoutError"
            for n in range(6)
        ],
        "  ... and 2 more",
        "  make[1]: *** [Makefile:89: test-brokers] Error 3",
        f"gone: no log at {tmp_path / 'gone.log'}",
    ]
