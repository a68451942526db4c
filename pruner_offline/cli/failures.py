"""pruner-train failures: the records of a store that could not be featurized, as file:line: reason."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    from ..store.reader import FeatureStore

    failures = FeatureStore(args.store).failures()
    for path, line, reason in failures:
        print(f"{path}:{line}: {reason}")
    print(f"{len(failures)} records of {args.store} not featurized", file=sys.stderr)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("failures", help="list the records of a store that could not be featurized, as file:line: reason")
    p.add_argument("store", type=Path)
    p.set_defaults(func=run)

