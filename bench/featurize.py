"""End-to-end featurization speed per core, for llvm and for cuda records, and where the time goes.

    python bench/featurize.py [DATASET] [--per-file 12]

On one core (the process is pinned), for an evenly spaced sample of records of every record file:
replay (Ansor steps → TIR) then features (per-store, op tag, dataflow, PSA symbols, draft score).
Prints records/s for each target and the share of replay and features; the reference in the same
run is the time of MetaSchedule's C++ PerStoreFeature alone on the same programs, which the
features stage cannot go below.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from pruner_offline.features.extract import featurize_prim_func
from pruner_offline.features.per_store import per_store_features
from pruner_offline.replay import replay_record
from pruner_offline.tenset.dataset import discover, load_task_index
from pruner_offline.tenset.records import Record, read_records

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", type=Path, default=REPO / "datasets" / "tenset-mini")
    ap.add_argument("--per-file", type=int, default=12, help="records sampled per record file")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    layout = discover(args.dataset)
    index = load_task_index(layout)
    files = [f for _, f in layout.record_files()] + layout.unmeasured_files()
    times: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, int] = defaultdict(int)
    warm = False
    for path in files:
        records = [r for r in read_records(path) if isinstance(r, Record)]
        pick = np.unique(np.linspace(0, len(records) - 1, min(args.per_file, len(records))).astype(int))
        for rec in (records[i] for i in pick):
            task = index.tasks[(rec.workload_key.text, rec.target_kind)]
            t0 = time.perf_counter()
            replayed = replay_record(task, rec)
            t1 = time.perf_counter()
            if not replayed.ok:
                continue
            func = replayed.mod["main"]
            featurize_prim_func(func, rec.target_kind)
            t2 = time.perf_counter()
            per_store_features(func, rec.target_kind)
            t3 = time.perf_counter()
            if not warm:  # the first call builds the extractor; keep it out of the rates
                warm = True
                continue
            kind = rec.target_kind
            counts[kind] += 1
            times[kind]["replay"] += t1 - t0
            times[kind]["features"] += t2 - t1
            times[kind]["per_store_only"] += t3 - t2
    for kind in sorted(counts):
        t = times[kind]
        total = t["replay"] + t["features"]
        print(f"{kind:>5}: {counts[kind]} records, {counts[kind] / total:6.1f} records/s on one core "
              f"(replay {t['replay'] / total:.0%}, features {t['features'] / total:.0%}); "
              f"PerStoreFeature alone is {t['per_store_only'] / t['features']:.0%} of the features time")


if __name__ == "__main__":
    main()
