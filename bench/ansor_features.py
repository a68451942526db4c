"""Ansor's own per-store feature extraction on a TenSet directory: the reference rate for
bench/featurize.py. Runs under an interpreter with hhb-tvm (TVM 0.16 with Ansor, Python 3.10),
never under ours:

    python3.10 -m venv /tmp/ansor && /tmp/ansor/bin/pip install hhb-tvm numpy
    /tmp/ansor/bin/python bench/ansor_features.py datasets/tenset-mini --per-file 12

Loads the task pickles as TenSet's scripts do, then for each record file times
``get_per_store_features_from_measure_pairs`` on the same evenly spaced lines bench/featurize.py
replays, on one core (the process is pinned, TVM's pool has one thread). Prints one JSON object:
{target kind: {"records": n, "seconds": wall s, "cpu_seconds": the process's CPU s}}.
"""

import argparse
import json
import os
import pickle
import time
from pathlib import Path

os.environ["TVM_NUM_THREADS"] = "1"  # before tvm starts its thread pool

import numpy as np  # noqa: E402
from tvm import auto_scheduler  # noqa: E402
from tvm.auto_scheduler.feature import get_per_store_features_from_measure_pairs  # noqa: E402


def sample(n: int, per_file: int) -> np.ndarray:
    """The lines bench/featurize.py takes of a file of ``n`` records."""
    return np.unique(np.linspace(0, n - 1, min(per_file, n)).astype(int))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--per-file", type=int, default=12, help="lines per file; 0: all")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    # the dataset's own pickles (a trusted, local benchmark input: this script is not the package)
    with open(args.dataset / "network_info" / "all_tasks.pkl", "rb") as f:
        for task in pickle.load(f):
            auto_scheduler.workload_registry.register_workload_tensors(task.workload_key, task.compute_dag.tensors)
    files = sorted((args.dataset / "measure_records").glob("*/*.json")) + \
        sorted((args.dataset / "to_measure_programs").glob("*.json"))
    out: dict = {}
    warm = False
    for path in files:
        inputs, results = auto_scheduler.RecordReader(str(path)).read_lines()
        pick = sample(len(inputs), args.per_file) if args.per_file else range(len(inputs))
        inputs, results = [inputs[i] for i in pick], [results[i] for i in pick]
        if not warm:  # the first call loads and compiles; keep it out of the rate as ours does
            get_per_store_features_from_measure_pairs(inputs[:1], results[:1])
            warm = True
        start, cpu_start = time.perf_counter(), time.process_time()
        get_per_store_features_from_measure_pairs(inputs, results)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        kind = str(inputs[0].task.target.kind.name)
        entry = out.setdefault(kind, {"records": 0, "seconds": 0.0, "cpu_seconds": 0.0})
        entry["records"] += len(inputs)
        entry["seconds"] += seconds
        entry["cpu_seconds"] += cpu_seconds
    print(json.dumps(out))


if __name__ == "__main__":
    main()
