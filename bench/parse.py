"""Record-parsing throughput on one core, against bare ``json.loads`` over the same lines.

    python bench/parse.py [DATASET] [--repeat 5] [--copies 10]

Reads every record line of the dataset (measured and unmeasured) into memory, repeats the
list ``--copies`` times, then times, alternately and ``--repeat`` times each, (a) bare
``json.loads`` per line and (b) ``parse_lines`` building typed records with every step code
checked. Prints the best time of each and their ratio. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from pruner_offline.tenset.dataset import discover
from pruner_offline.tenset.records import BadLine, parse_lines

REPO = Path(__file__).resolve().parents[1]


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=REPO / "datasets" / "tenset-mini", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--copies", type=int, default=10)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the target says

    layout = discover(args.dataset)
    files = [f for _, f in layout.record_files()] + layout.unmeasured_files()
    lines = [line for f in files for line in f.read_bytes().splitlines(keepends=True)]
    lines = [line for line in lines if line.strip() and not line.startswith(b"#")] * args.copies
    mean_len = sum(map(len, lines)) / len(lines)

    def bare_json() -> None:
        for line in lines:
            json.loads(line)

    def ours() -> None:
        for item in parse_lines(lines, "bench"):
            if isinstance(item, BadLine):
                raise SystemExit(f"unexpected bad line: {item}")

    t_json = t_ours = float("inf")
    for _ in range(args.repeat):  # alternate so that machine noise hits both alike
        t_json = min(t_json, _best(bare_json, 1))
        t_ours = min(t_ours, _best(ours, 1))
    n = len(lines)
    print(f"lines: {n} ({len(files)} files x {args.copies}), mean {mean_len:.0f} bytes/line")
    print(f"json.loads only : {n / t_json:10.0f} lines/s")
    print(f"pruner_offline  : {n / t_ours:10.0f} lines/s  (typed records, steps checked)")
    print(f"ratio ours/json : {t_ours / t_json:.2f}x time")


if __name__ == "__main__":
    main()
