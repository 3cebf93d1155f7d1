"""The test harness's own plug-in (``helpers/report_retry.py``): a report broken by
Python 3.11's AST depth mismatch is made again; any other error in making one is not
hidden."""

from __future__ import annotations

import pytest

BREAK_THE_FIRST_REPORT = """
import pytest

broken = []

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item, call):
    if call.when == "call" and not broken:
        broken.append(item.name)
        raise SystemError({message!r})
"""

TESTS = """
def test_fails():
    assert [1, 2] == [1, 3]

def test_passes():
    pass
"""


def test_a_report_broken_by_the_ast_depth_mismatch_is_made_again(
    pytester: pytest.Pytester,
) -> None:
    message = "AST constructor recursion depth mismatch (before=129, after=177)"
    pytester.makeconftest(BREAK_THE_FIRST_REPORT.format(message=message))
    pytester.makepyfile(TESTS)
    result = pytester.runpytest(
        "-p", "helpers.report_retry", "-p", "no:asyncio", "-p", "no:looptime_plugin"
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*assert [[]1, 2[]] == [[]1, 3[]]*"])
    assert "INTERNALERROR" not in result.stdout.str()


def test_another_error_in_making_a_report_still_stops_the_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(BREAK_THE_FIRST_REPORT.format(message="something else"))
    pytester.makepyfile(TESTS)
    result = pytester.runpytest(
        "-p", "helpers.report_retry", "-p", "no:asyncio", "-p", "no:looptime_plugin"
    )
    result.stdout.fnmatch_lines(["INTERNALERROR>*SystemError: something else"])
