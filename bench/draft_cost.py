"""Per-candidate cost of each scoring stage on real MetaSchedule candidates (llvm), in one process:

- walk: the draft inputs from a full TIR walk of each program (the draft stage before templates);
- draft: our draft stage on new programs (features/draft_templates.py: one pass over each program's
  loops, templates of loop structures, symbols and analytic scores of the batch in one numpy pass),
  with the templates of the batch already known ("warm": a tuning run reuses them for thousands of
  programs) and from empty ("cold": every structure in the batch walked once);
- py draft: the warm draft with the loops read by the Python pass (tir_walk.skeleton) instead of
  the native one (native_skeleton.py), the reference it replaces;
- full + PaCM: the verifier's stage (full features and a PaCM forward);
- XGB predict: MetaSchedule's XGBModel once it predicts (from 100 measured samples on): its C++
  PerStoreFeature extraction and the booster, on the same candidates.

Candidates are drawn uniformly from the design space, so they share fewer loop structures than a
tuning population does (`tune` reports templates_templates against templates_programs).
Ratios printed: full+PaCM / draft (how much cheaper the draft is per candidate), the same for the
Python pass's draft, XGB / draft.
Times are this process's CPU time (best of --repeat): on a machine shared with other jobs, wall
time moved the ratios by 1.5x between runs.

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
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
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
    from tvm.s_tir.meta_schedule.cost_model import XGBModel
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    from pruner_offline.features.draft_templates import DraftTemplates
    from pruner_offline.features.extract import featurize_prim_func
    from pruner_offline.features.native import compiled
    from pruner_offline.features.symbols import psa_symbols
    from pruner_offline.features.tir_walk import walk
    from pruner_offline.tuning.cost_model.candidates import features_batch
    from pruner_offline.tuning.cost_model.pruner import load_checkpoint
    from pruner_offline.tuning.search.sampling import sample_candidates
    from pruner_offline.tuning.frontends.workloads import named_workload

    torch.set_num_threads(1)
    if compiled() is None:
        print("the native loop skeleton did not build: draft and py draft are both the Python pass")
    pacm = load_checkpoint(args.checkpoint).eval()
    header = ["walk us", "draft us", "py draft us", "cold us", "full+PaCM us", "XGB us", "full/draft",
              "full/py draft", "XGB/draft", "walk/draft"]
    print(f"{'workload':<14}" + "".join(f"{h:>14}" for h in header))
    totals = np.zeros(6)
    for wl in args.workloads:
        context, cands = sample_candidates(named_workload(wl), args.n)
        schedules = [c.sch for c in cands]
        funcs = [s.mod["main"] for s in schedules]
        warm, warm_py = DraftTemplates("llvm"), DraftTemplates("llvm", native=False)
        warm.draft(funcs)
        warm_py.draft(funcs)

        def full_and_pacm():
            feats = [featurize_prim_func(s, "llvm") for s in schedules]
            with torch.no_grad():
                pacm(features_batch(feats))

        xgb = XGBModel(num_warmup_samples=0, num_tuning_cores=1)
        rng = np.random.default_rng(0)
        xgb.update(context, cands, [RunnerResult([float(x)], None) for x in rng.uniform(1e-4, 1e-3, len(cands))])
        times = np.array([
            best_of(lambda: [psa_symbols(walk(f).rows, False) for f in funcs], args.repeat),
            best_of(lambda: warm.draft(funcs), args.repeat),
            best_of(lambda: warm_py.draft(funcs), args.repeat),
            best_of(lambda: DraftTemplates("llvm").draft(funcs), args.repeat),
            best_of(full_and_pacm, args.repeat),
            best_of(lambda: xgb.predict(context, cands), args.repeat),
        ]) / len(cands)
        totals += times
        print(row(wl, 1e6 * times), flush=True)
    print(row("mean", 1e6 * totals / len(args.workloads)))


def row(name: str, us) -> str:
    walk, draft, py_draft, cold, full, xgb = us
    return f"{name:<14}" + "".join(f"{v:>14.0f}" for v in us) + "".join(
        f"{v:>14.1f}" for v in (full / draft, full / py_draft, xgb / draft, walk / draft))


if __name__ == "__main__":
    main()
