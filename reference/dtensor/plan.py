"""Print the plan of a redistribution: which collective each mesh dim's step makes.

    python -m reference.dtensor.plan "S(0),S(1)" "R,S(1)"

A module of its own, not ``redistribute``'s ``__main__``: the package imports ``redistribute``,
and running an already imported module as ``__main__`` makes Python warn.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from reference.dtensor.placements import parse
from reference.dtensor.redistribute import plan


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Print the plan of a redistribution.")
    parser.add_argument("source", help='e.g. "S(0),S(0)"')
    parser.add_argument("target", help='e.g. "S(1),R"')
    args = parser.parse_args(argv)
    print(plan(parse(args.source), parse(args.target)))


if __name__ == "__main__":
    main()
