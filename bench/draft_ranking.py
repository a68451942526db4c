"""Benchmark: how the analytic CPU draft score ranks measured programs, with the register-tile term
and without it (the same constants with ``vector_registers`` 0, as files made before the term read).

Per source (a TenSet directory, a MetaSchedule work directory or a directory of them), per task, over
the measured llvm programs: pairwise accuracy against the measured speed (a tie counts half), peak@1
(the best-scored program's speed / the task's best), the share of programs whose score another
program of the task shares, and, over the pairs that the score without the term puts within --near
of each other (log scale), the share each score orders right and wrong. Those pairs are what a
draft-led search meets: it climbs to the top of the score, where the programs it measures all score
about the same.

    python bench/draft_ranking.py runs/bench-tune/past ../shared/tenset-mini
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np


def task_metrics(score: np.ndarray, speed: np.ndarray, base: np.ndarray, near: float) -> dict[str, float]:
    """base: the scores that decide which pairs are near."""
    i, j = np.triu_indices(len(speed), 1)
    differ = speed[i] != speed[j]
    said, truth = np.sign(score[i] - score[j]), np.sign(speed[i] - speed[j])
    close = differ & (np.abs(np.log(base[i]) - np.log(base[j])) < near)
    _, inverse, counts = np.unique(score, return_inverse=True, return_counts=True)
    return {"pairwise": float(np.mean((said == truth)[differ]) + 0.5 * np.mean((said == 0)[differ])),
            "peak@1": float(speed[np.argmax(score)] / speed.max()),
            "tied": float(np.mean(counts[inverse] > 1)),
            "near_right": float((said == truth)[close].sum()), "near_wrong": float((said == -truth)[close].sum()),
            "near_pairs": float(close.sum())}


def source_tasks(path: Path, min_programs: int):
    """[(task name, [statement rows of each program], measured speed of each)] of the llvm tasks."""
    from pruner_offline.features.native_walk import fast_walk
    from pruner_offline.sources.base import open_source

    source = open_source(path)
    for unit in source.units():
        got = source.programs(unit)
        if got.target_kind != "llvm":
            continue
        rows, speed = [], []
        for p in got.programs:
            if p.func is None or not np.isfinite(p.label) or p.label <= 0:
                continue
            func = p.func.mod["main"] if hasattr(p.func, "mod") else p.func
            rows.append(fast_walk(func).rows)
            speed.append(p.label)
        if len(rows) >= min_programs:
            yield unit.name, rows, np.array(speed)


def main() -> None:
    from pruner_offline.devices import get_device
    from pruner_offline.features.draft_score import analytic_score
    from pruner_offline.features.symbols import psa_symbols

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sources", nargs="+", type=Path)
    ap.add_argument("--device", default="epyc-2vcpu", help="CPU constants of the score")
    ap.add_argument("--near", type=float, default=0.05, help="log-score distance of the pairs counted as near")
    ap.add_argument("--min-programs", type=int, default=5)
    args = ap.parse_args()
    dev = get_device(args.device)
    variants = {"without the term": replace(dev, vector_registers=0), "with the register tile": dev}
    print(f"constants {dev.name} ({dev.vector_registers} SIMD registers); near: pairs whose scores without the term "
          f"lie within {args.near} (log)")
    print(f"{'source':<28}{'score':<24}{'tasks':>6}{'programs':>9}{'pairwise':>10}{'peak@1':>8}{'tied':>7}"
          f"{'near right':>12}{'wrong':>7}{'pairs':>8}")
    for path in args.sources:
        tasks = list(source_tasks(path, args.min_programs))
        symbols = [[psa_symbols(r, False) for r in rows] for _, rows, _ in tasks]  # the same for both scores
        scores = {name: [np.array([analytic_score(sym, d) for sym in task]) for task in symbols]
                  for name, d in variants.items()}
        for name in variants:
            per_task = [task_metrics(score, speed, base, args.near) for score, base, (_, _, speed)
                        in zip(scores[name], scores["without the term"], tasks)]
            if not per_task:
                print(f"{path.name:<28}{name:<24} no llvm task with {args.min_programs} measured programs")
                continue
            mean = {k: float(np.mean([m[k] for m in per_task])) for k in ("pairwise", "peak@1", "tied")}
            pairs = sum(m["near_pairs"] for m in per_task)
            right, wrong = (sum(m[k] for m in per_task) / max(pairs, 1) for k in ("near_right", "near_wrong"))
            print(f"{path.name:<28}{name:<24}{len(tasks):>6}{sum(len(r) for _, r, _ in tasks):>9}"
                  f"{mean['pairwise']:>10.3f}{mean['peak@1']:>8.3f}{mean['tied']:>7.3f}{right:>12.3f}{wrong:>7.3f}"
                  f"{int(pairs):>8}")


if __name__ == "__main__":
    main()
