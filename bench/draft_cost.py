"""Per-candidate cost of each scoring stage on real MetaSchedule candidates (llvm), in one process:

- key: finding a program seen before (structural hash; survivors are found by identity, ~1 us);
- draft: our draft stage on new programs (TIR walk -> PSA symbols -> analytic score, batched);
- full + PaCM: the verifier's stage (full features, reusing the draft's walk, and a PaCM forward);
- XGB predict: MetaSchedule's XGBModel once it predicts (from 100 measured samples on): its C++
  PerStoreFeature extraction and the booster, on the same candidates.

Ratios printed: full+PaCM / draft (how much cheaper the draft is per candidate) and XGB / draft.

    python bench/draft_cost.py [--n 200] [--workloads matmul conv2d ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", nargs="+", default=["matmul", "conv2d", "depthwise", "batch-matmul"])
    ap.add_argument("--n", type=int, default=150, help="candidates per workload")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--checkpoint", default=str(REPO / "checkpoints" / "pacm.pt"))
    args = ap.parse_args()

    import numpy as np
    import torch
    import tvm_ffi
    from tvm.s_tir.meta_schedule.cost_model import XGBModel
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    from pruner_offline.features.extract import featurize_prim_func, psa_batch
    from pruner_offline.tuning.candidates import features_batch
    from pruner_offline.tuning.cost_model import load_checkpoint
    from pruner_offline.tuning.sampling import sample_candidates
    from pruner_offline.tuning.workloads import named_workload

    torch.set_num_threads(1)
    pacm = load_checkpoint(args.checkpoint).eval()
    print(f"{'workload':<14}{'key us':>9}{'draft us':>10}{'full+PaCM us':>14}{'XGB us':>9}{'full/draft':>12}"
          f"{'XGB/draft':>11}")
    totals = np.zeros(4)
    for wl in args.workloads:
        context, cands = sample_candidates(named_workload(wl), args.n)
        schedules = [c.sch for c in cands]
        drafts = psa_batch(schedules, "llvm")

        def full_and_pacm():
            feats = [featurize_prim_func(s, "llvm", walked=d.walked) for s, d in zip(schedules, drafts)]
            with torch.no_grad():
                pacm(features_batch(feats))

        xgb = XGBModel(num_warmup_samples=0, num_tuning_cores=1)
        rng = np.random.default_rng(0)
        xgb.update(context, cands, [RunnerResult([float(x)], None) for x in rng.uniform(1e-4, 1e-3, len(cands))])
        times = np.array([
            best_of(lambda: [tvm_ffi.structural_hash(s.mod) for s in schedules], args.repeat),
            best_of(lambda: psa_batch(schedules, "llvm"), args.repeat),
            best_of(full_and_pacm, args.repeat),
            best_of(lambda: xgb.predict(context, cands), args.repeat),
        ]) / len(cands)
        totals += times
        us = 1e6 * times
        print(f"{wl:<14}{us[0]:>9.0f}{us[1]:>10.0f}{us[2]:>14.0f}{us[3]:>9.0f}{us[2] / us[1]:>12.1f}"
              f"{us[3] / us[1]:>11.1f}", flush=True)
    us = 1e6 * totals / len(args.workloads)
    print(f"{'mean':<14}{us[0]:>9.0f}{us[1]:>10.0f}{us[2]:>14.0f}{us[3]:>9.0f}{us[2] / us[1]:>12.1f}"
          f"{us[3] / us[1]:>11.1f}")


if __name__ == "__main__":
    main()
