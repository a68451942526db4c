"""Measure the llvm programs of a TenSet-layout directory on this CPU with Ansor's own builder and
runner (hhb-tvm: TVM 0.16's Ansor), the way tenset-mini's llvm records were measured, and move
them from ``to_measure_programs/`` to ``measure_records/DEVICE/`` with Ansor's features of the
measured lines under ``oracle/`` (the layout of ../shared/ansor-public-logs/oracle/README.md).

Made for ``datasets/ansor-sampled``: programs of operators no tenset-mini network has, measured on
the machine tenset-mini was measured on, so that models trained on tenset-mini can be scored on
unseen operators (``bench/generalize.py --datasets unseen-ops``).

Runs under an interpreter with hhb-tvm, never the package's (it is not a dependency), alone on the
machine (costs carry its load):

    /tmp/ansor/bin/python bench/ansor_measure.py datasets/ansor-sampled [--device epyc-zen3]

Settings as tenset-mini's README gives them: target ``llvm -mtriple=x86_64-linux-gnu
-mcpu=core-avx2 -model=DEVICE``, the task's hardware params, ``LocalBuilder(timeout=15)`` with 2
parallel builds, ``LocalRunner(timeout=5, number=1, repeat=3, enable_cpu_cache_flush=True)``,
batches of 48, failures kept as they came. A file already measured is skipped, so an interrupted
run resumes.
"""

from __future__ import annotations

import argparse
import json
import pickle
from pathlib import Path

import numpy as np
from tvm import auto_scheduler

BATCH = 48
TARGET = "llvm -mtriple=x86_64-linux-gnu -mcpu=core-avx2 -model={}"


def measure_file(path: Path, out: Path, device: str) -> tuple[int, int]:
    """(lines, failed) of the record file ``path`` measured into ``out``."""
    inputs = list(auto_scheduler.RecordReader(str(path)).read_lines()[0])  # a TVM Array cannot be sliced past its end
    first = auto_scheduler.measure.recover_measure_input(inputs[0]).task
    task = auto_scheduler.SearchTask(
        workload_key=first.workload_key, target=TARGET.format(device),
        hardware_params=first.hardware_params, layout_rewrite_option=first.layout_rewrite_option)
    partial = out.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    builder = auto_scheduler.LocalBuilder(timeout=15, n_parallel=2)
    runner = auto_scheduler.LocalRunner(timeout=5, number=1, repeat=3, enable_cpu_cache_flush=True)
    failed = 0
    for lo in range(0, len(inputs), BATCH):
        batch = [auto_scheduler.MeasureInput(task, i.state) for i in inputs[lo:lo + BATCH]]
        results = runner.run(batch, builder.build(batch, verbose=0), verbose=0)
        auto_scheduler.save_records(str(partial), batch, results)  # appends
        failed += sum(int(r.error_no) != 0 for r in results)
    partial.rename(out)
    return len(inputs), failed


def write_oracle(record_file: Path, npz: Path) -> None:
    inputs, results = auto_scheduler.RecordReader(str(record_file)).read_lines()
    feats, _, _ = auto_scheduler.feature.get_per_store_features_from_measure_pairs(inputs, results)
    mats = [np.asarray(f, dtype=np.float32).reshape(-1, 164) if len(f) else np.zeros((0, 164), np.float32)
            for f in feats]
    costs = np.array([np.mean([float(c) for c in r.costs]) if int(r.error_no) == 0 else np.inf for r in results])
    ok = np.isfinite(costs)
    labels = np.where(ok, costs[ok].min() / np.where(ok, costs, 1.0), 0.0) if ok.any() else np.zeros(len(costs))
    n_stores = np.array([len(m) for m in mats], dtype=np.int32)
    npz.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(npz, n_stores=n_stores, offsets=np.concatenate([[0], np.cumsum(n_stores * 164)]).astype(np.int64),
                        features=np.concatenate([m.ravel() for m in mats]), labels=labels.astype(np.float32),
                        cost_mean=np.where(ok, costs, 0.0), error_no=np.array([int(r.error_no) for r in results], np.int32))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--device", default="epyc-zen3")
    args = ap.parse_args()
    with open(args.root / "network_info" / "all_tasks.pkl", "rb") as f:
        for t in pickle.load(f):  # the record reader finds each workload's compute by its key
            auto_scheduler.workload_registry.register_workload_tensors(t.workload_key, t.compute_dag.tensors)
    out_dir = args.root / "measure_records" / args.device
    out_dir.mkdir(parents=True, exist_ok=True)
    index_path = args.root / "oracle" / "index.json"
    index = json.loads(index_path.read_text())
    for src in sorted((args.root / "to_measure_programs").glob("*,llvm).json")):
        out = out_dir / src.name
        if not out.is_file():
            lines, failed = measure_file(src, out, args.device)
            print(f"{src.name}: {lines} measured, {failed} failed", flush=True)
        rel = out.relative_to(args.root)
        write_oracle(out, args.root / "oracle" / rel.with_suffix(".npz"))
        old = str(src.relative_to(args.root))
        entry = index["files"].pop(old, None) or {}
        index["files"][str(rel)] = {**entry, "target": TARGET.format(args.device)}
        (args.root / "oracle" / Path(old).with_suffix(".npz")).unlink(missing_ok=True)
        src.unlink()  # as in TenSet, the measured file replaces the unmeasured one
    index_path.write_text(json.dumps(index, indent=1))


if __name__ == "__main__":
    main()
