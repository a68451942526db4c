"""pruner-train merge: shards of a featurize or collect run into one, or the stores of several
datasets into one training store."""

from __future__ import annotations

import argparse
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    from ..collect.merge import is_collection, merge_collections
    from ..store.merge import merge_stores

    if all(is_collection(p) for p in args.shards):
        n, what = merge_collections(args.out, args.shards), "shards"
    else:
        n, what = merge_stores(args.out, args.shards)
    print(f"merged {len(args.shards)} {what}, {n} records -> {args.out}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("merge", help="merge shards into one (stores featurized with --shard, or collections "
                       "collected with --shard), or feature stores of different datasets, featurized "
                       "with the same settings, into one store to train on")
    p.add_argument("shards", type=Path, nargs="+")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=run)
