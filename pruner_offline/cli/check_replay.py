"""pruner-train check-replay: replayed programs' per-store features against the dataset's oracle/."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import dumps
from ..progress import Progress
from .options import bounded


def run(args: argparse.Namespace) -> int:
    from ..replay.fidelity import OracleMissing, check_replay, format_table

    with Progress("checking", "rec", quiet=args.quiet) as bar:
        try:
            report = check_replay(args.dataset, args.sample, args.tol, on_record=lambda: bar.update(1))
        except OracleMissing as exc:
            print(f"pruner-train: {exc}", file=sys.stderr)
            return 2
    print(format_table(report))
    if args.json:
        print(dumps(report.to_json(), sort_keys=True))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("check-replay", help="compare replayed programs' per-store features with the "
                       "dataset's oracle/ (Ansor's own), per feature group")
    p.add_argument("dataset", type=Path)
    p.add_argument("--sample", type=bounded(int, min=0), default=0, help="records per record file, evenly spaced (0: all)")
    p.add_argument("--tol", type=bounded(float, above=0), default=0.05,
                   help="agreement tolerance on the log-scaled values")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=run)

