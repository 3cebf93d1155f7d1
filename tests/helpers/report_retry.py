"""A pytest plug-in: a failing test's report is made again when Python's AST builder
trips over itself while pytest parses the test's source.

CPython 3.11 keeps the AST builder's recursion count in one place per interpreter, so a
parse that starts inside another makes the outer one raise ``SystemError: AST
constructor recursion depth mismatch``. pytest parses a failing test's source to show it;
a garbage collection during that parse can run a finalizer that logs a traceback (an
asyncio task whose exception nobody retrieved, say), and 3.11 parses each traceback line
for its carets. The ``SystemError`` became an INTERNALERROR that ended a whole CI lane.
3.12 and 3.13 do not show it. A report is made again once: the same collision twice in a
row is not expected.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

AST_DEPTH_MISMATCH = "AST constructor recursion depth mismatch"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    try:
        return (yield)
    except SystemError as exc:
        if AST_DEPTH_MISMATCH not in str(exc):
            raise
        return pytest.TestReport.from_item_and_call(item, call)
