"""How well the analytic H200 draft score ranks real MetaSchedule CUDA programs measured on an H200.

Featurizes a sample of ../shared/h200-ms (1821 programs over 16 workloads) and prints, as one JSON
line: the Spearman correlation between draft score and measured run time (pooled, and the mean of
the per-workload correlations, which is what ranking within a tuning task needs), the same figure for
a reference measured in the same run (launched threads, grid x block, alone) and featurization speed.
A good draft score is strongly *negatively* correlated with run time.

    python bench/draft_score_h200.py [--root ../shared/h200-ms] [--limit 400] [--device h200]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "shared" / "h200-ms"


@dataclass(frozen=True)
class MeasuredProgram:
    workload: str
    func: object  # scheduled tvm.tirx.PrimFunc
    run_secs: float  # mean of the measured launches


def load_h200_programs(root: Path, lines: list[int]) -> list[MeasuredProgram]:
    """The scheduled PrimFuncs of the given record lines (0-based) of the h200-ms database."""
    from pruner_offline.sources.metaschedule import MetaScheduleSource

    wanted = {i + 1 for i in lines}
    source = MetaScheduleSource(root)
    return [MeasuredProgram(f"workload{u.index}", p.func, p.cost) for u in source.units()
            for p in source.programs(u).programs if p.line in wanted and p.func is not None]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def main() -> None:
    from pruner_offline.features import SYMBOL_COLUMNS
    from pruner_offline.features.extract import featurize_prim_func

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--limit", type=int, default=400)
    parser.add_argument("--device", default="h200")
    args = parser.parse_args()

    n_lines = len((args.root / "database_tuning_record.json").read_text().splitlines())
    lines = sorted(set(np.linspace(0, n_lines - 1, min(args.limit, n_lines)).astype(int).tolist()))
    programs = load_h200_programs(args.root, lines)
    featurize_prim_func(programs[0].func, "cuda", device=args.device)  # warm the extractor
    start = time.perf_counter()
    features = [featurize_prim_func(p.func, "cuda", device=args.device) for p in programs]
    seconds = time.perf_counter() - start
    scores = np.array([f.draft_score for f in features])
    # Reference: launched threads alone (more parallelism = faster), from the same symbols.
    grid, block = SYMBOL_COLUMNS.index("grid"), SYMBOL_COLUMNS.index("block")
    threads = np.array([(f.symbols[:, grid] * f.symbols[:, block]).max() for f in features])
    times = np.array([p.run_secs for p in programs])

    by_workload = defaultdict(list)
    for i, p in enumerate(programs):
        by_workload[p.workload].append(i)
    by_workload = {w: idx for w, idx in by_workload.items() if len(idx) >= 5}
    per_workload = {w: spearman(scores[idx], times[idx]) for w, idx in by_workload.items()}
    reference = [spearman(threads[idx], times[idx]) for idx in by_workload.values()]
    print(json.dumps({
        "programs": len(programs),
        "device": args.device,
        "spearman_score_vs_time": round(spearman(scores, times), 4),
        "mean_per_workload_spearman": round(float(np.mean(list(per_workload.values()))), 4),
        "reference_threads_mean_per_workload_spearman": round(float(np.mean(reference)), 4),
        "per_workload_spearman": {w: round(r, 3) for w, r in sorted(per_workload.items())},
        "programs_per_second": round(len(programs) / seconds, 1),
    }))


if __name__ == "__main__":
    main()
