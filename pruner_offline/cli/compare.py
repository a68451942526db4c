"""pruner-train compare: every model trained on one split and seed, side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import dumps
from ..models.registry import MODEL_NAMES
from .options import bounded, data_args
from .stores import ensure_store, print_with_reference, store_schema


def run(args: argparse.Namespace) -> int:
    from ..training.compare import compare

    store = ensure_store(args.data, args.out / "features", args.jobs, args.quiet)
    split = args.split or "within_task"
    results, reference = compare(store, split, args.out, seed=args.seed, models=args.models,
                                  max_epochs=args.max_epochs, feature_schema=store_schema(store), quiet=args.quiet)
    print(f"split {split}, seed {args.seed}, store {store}")
    print_with_reference(results, reference)
    for name, r in results.items():
        if "skipped" in r:
            print(f"{name}: skipped, {r['skipped']}")
    if args.json:
        print(dumps({**results, "reference": reference}, sort_keys=True))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="train every model on one split and seed; side-by-side table")
    data_args(p, "default within_task")
    p.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    p.add_argument("--out", type=Path, default=Path("runs/compare"))
    p.add_argument("--max-epochs", type=bounded(int, min=1))
    p.set_defaults(func=run)

