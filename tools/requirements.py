"""Print the requirements of the project with the extras named, one a line.

``make test`` installs the Python 3.13 virtualenv's dependencies from this list while
the 3.11 virtualenv installs, and the project itself into it afterwards (``pip install
--no-deps``): the two editable installs both write the build/__editable__ link tree, so
they cannot run at once, but their dependencies can. The project's extras that name
others of its extras (``msgstream[kafka]``) are expanded here, as pip expands them.

    python tools/requirements.py dev,kafka,pulsar,spark
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def expanded(extras: list[str], declared: Mapping[str, list[str]], name: str) -> Iterator[str]:
    """The requirements of ``extras``, those of the project's own extras they name too."""
    for extra in extras:
        for requirement in declared[extra]:
            own = re.fullmatch(rf"{re.escape(name)}\[(.+)\]", requirement)
            if own:
                yield from expanded(own[1].split(","), declared, name)
            else:
                yield requirement


def main() -> None:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    extras = [extra for extra in sys.argv[1].split(",") if extra] if len(sys.argv) > 1 else []
    wanted = [
        *project["dependencies"],
        *expanded(extras, project["optional-dependencies"], project["name"]),
    ]
    print("\n".join(dict.fromkeys(wanted)))


if __name__ == "__main__":
    main()
