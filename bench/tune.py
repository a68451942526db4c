"""Benchmark: search time of MetaSchedule with its default XGB cost model vs ours (draft-then-verify
from a checkpoint), same trial budget, several seeds, a few workloads, on this CPU.

Per workload: the speedup in search time to reach the baseline's final latency (baseline seconds to
its own final best / our seconds to reach that latency; geometric mean over the seeds where we got
there), both final latencies (median over seeds) and each model's share of search time spent in the
cost model. Runs alternate between the two models so that load on a shared machine hits both.

    python bench/tune.py --checkpoint checkpoints/pacm.pt --draft checkpoints/draft.pt
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from pathlib import Path

from pruner_offline.tuning.run import TuneReport, TuneSettings, tune
from pruner_offline.tuning.workloads import WORKLOADS, named_workload

REPO = Path(__file__).resolve().parents[1]


def seconds_to_reach(r: TuneReport, latency: float) -> float:
    for best, t in zip(r.best_latency_per_batch, r.batch_end_seconds):
        if best <= latency:
            return t
    return math.inf


def summarize(workload: str, base: list[TuneReport], ours: list[TuneReport]) -> dict:
    ratios = []
    for b, o in zip(base, ours):
        target = b.best_latency_s
        ratios.append(seconds_to_reach(b, target) / seconds_to_reach(o, target))
    reached = [x for x in ratios if x > 0]
    share = lambda rs: sum(r.cost_model_seconds for r in rs) / sum(r.search_seconds for r in rs)
    return {
        "workload": workload,
        "speedup": math.exp(statistics.mean(math.log(x) for x in reached)) if reached else 0.0,
        "reached": f"{len(reached)}/{len(ratios)}",
        "xgb_final_ms": 1e3 * statistics.median(r.best_latency_s for r in base),
        "ours_final_ms": 1e3 * statistics.median(r.best_latency_s for r in ours),
        "xgb_cm_share": share(base), "ours_cm_share": share(ours),
        "xgb_search_s": statistics.mean(r.search_seconds for r in base),
        "ours_search_s": statistics.mean(r.search_seconds for r in ours),
    }


def table(rows: list[dict]) -> str:
    head = (f"{'workload':<14}{'speedup':>9}{'reached':>9}{'xgb ms':>10}{'ours ms':>10}"
            f"{'xgb cm%':>9}{'ours cm%':>10}{'xgb s':>8}{'ours s':>8}")
    lines = [head]
    for r in rows:
        speedup = f"{r['speedup']:>8.2f}x" if r["speedup"] else f"{'never':>9}"
        lines.append(f"{r['workload']:<14}{speedup}{r['reached']:>9}{r['xgb_final_ms']:>10.4f}"
                     f"{r['ours_final_ms']:>10.4f}{100 * r['xgb_cm_share']:>8.1f}%{100 * r['ours_cm_share']:>9.1f}%"
                     f"{r['xgb_search_s']:>8.1f}{r['ours_search_s']:>8.1f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", nargs="+", default=["matmul", "dense", "batch-matmul"], choices=list(WORKLOADS))
    ap.add_argument("--checkpoint", default=str(REPO / "checkpoints" / "pacm.pt"))
    ap.add_argument("--draft", default=None, help="learned draft model (default: the analytic draft score)")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--trials-per-batch", type=int, default=8)
    ap.add_argument("--population", type=int, default=256, help="evolutionary search population (MetaSchedule: 512)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--verify-fraction", type=float, default=0.2)
    ap.add_argument("--online-epochs", type=int, default=0)
    ap.add_argument("--online-method", choices=("retrain", "moa"), default="retrain")
    ap.add_argument("--work-dir", type=Path, default=None, help="keep the databases here (default: a temp dir)")
    args = ap.parse_args()
    if not Path(args.checkpoint).is_file():
        ap.error(f"no checkpoint at {args.checkpoint}: pass --checkpoint (pruner-train pretrain writes one)")
    root = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-tune-"))
    rows = []
    for wl in args.workloads:
        base, ours = [], []
        for seed in args.seeds:
            common = dict(trials=args.trials, trials_per_batch=args.trials_per_batch,
                          population_size=args.population, seed=seed)
            for name, out, s in (
                    ("xgb", base, TuneSettings(cost_model="xgb", **common)),
                    ("pruner", ours, TuneSettings(cost_model="pruner", checkpoint=args.checkpoint, draft=args.draft,
                                                  verify_fraction=args.verify_fraction,
                                                  online_epochs=args.online_epochs,
                                                  online_method=args.online_method, **common))):
                r = tune(named_workload(wl), wl, root / f"{wl}-{name}-{seed}", s)
                print(json.dumps({"workload": wl, "model": name, "seed": seed, "final_s": r.best_latency_s,
                                  "curve": r.best_latency_per_batch, "t": r.batch_end_seconds,
                                  "cost_model_s": r.cost_model_seconds}), flush=True)
                out.append(r)
        rows.append(summarize(wl, base, ours))
    print(f"trials {args.trials}, batch {args.trials_per_batch}, population {args.population}, "
          f"seeds {args.seeds}, checkpoint {args.checkpoint}, draft {args.draft or 'analytic'}")
    print(table(rows))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
