"""pruner-train merge: shards of a featurize or collect run into one."""

from __future__ import annotations

import argparse
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    from ..collect.merge import is_collection, merge_collections
    from ..store.merge import merge

    n = merge_collections(args.out, args.shards) if all(is_collection(p) for p in args.shards) else merge(args.out, args.shards)
    print(f"merged {len(args.shards)} shards, {n} records -> {args.out}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("merge", help="merge shards into one: stores featurized with --shard, or collections "
                       "collected with --shard")
    p.add_argument("shards", type=Path, nargs="+")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=run)
