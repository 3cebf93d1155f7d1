"""The last lines of ``make test``: each lane's outcome and what failed in it.

``make test`` prints its three lanes' logs whole, one after another; a reader who sees only
the end (a CI page cut to its tail) would otherwise find only the last lane's last lines.
This prints, per log: every pytest run's outcome line, an ``INTERNALERROR``'s last line,
the first few ``FAILED``/``ERROR`` lines of pytest's short summary, and the make targets
that failed (a lint step has no pytest line).

Usage: ``python tools/test_summary.py TITLE=LOG [TITLE=LOG ...]``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SHOWN_PER_LANE = 6
"""Failed tests named per lane; the rest are counted."""

_OUTCOME = re.compile(
    r"^=*\s*\d+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)\b.* in "
    r"[\d.]+s\b"
)
_FAILED = re.compile(r"^(FAILED|ERROR) ")
_MAKE_FAILED = re.compile(r"^make(\[\d+\])?: \*\*\* ")


def summarise(title: str, text: str) -> list[str]:
    """The summary lines of one lane's log (``title`` heads them)."""
    lines = text.splitlines()
    outcomes = [line.strip("= ") for line in lines if _OUTCOME.match(line)]
    failed = [line for line in lines if _FAILED.match(line)]
    internal = [line for line in lines if line.startswith("INTERNALERROR>")][-1:]
    make_failed = [line for line in lines if _MAKE_FAILED.match(line)]
    out = [f"{title}: {'; '.join(outcomes) if outcomes else 'no pytest outcome line'}"]
    out += [f"  {line}" for line in internal + failed[:SHOWN_PER_LANE]]
    if len(failed) > SHOWN_PER_LANE:
        out.append(f"  ... and {len(failed) - SHOWN_PER_LANE} more")
    out += [f"  {line}" for line in make_failed]
    return out


def main(argv: list[str]) -> int:
    print("===== summary")
    for arg in argv:
        title, _, path = arg.partition("=")
        log = Path(path)
        if not log.is_file():
            print(f"{title}: no log at {path}")
            continue
        text = log.read_text(encoding="utf-8", errors="replace")
        print("\n".join(summarise(f"{title} ({path})", text)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
