"""In-task ranking inside tuning runs: how well a cost model, updated online on the programs a run
measured first, ranks the programs the run measured after them (which it has not seen).

    python bench/intask.py RUN_DIR [RUN_DIR ...] [--checkpoint PACM] [--models ...] [--at 32 64 ...]

Each RUN_DIR is the MetaSchedule work directory of one tuning run (bench/tune.py's OUT/runs/*).
Its measured programs go, in the order the run measured them and in batches of --batch, to each
model's update() as a tuning run hands them over; after k of them the model scores the rest.
Printed per k, mean over runs: Kendall's tau between the scores and minus the latency (1: the
model orders the rest exactly), and the best latency of the rest / the latency of the model's
first pick (1: it picks the best). Models:
- xgb: MetaSchedule's XGB model as `tune --cost-model xgb` builds it, which scores at random until
  it holds 100 measured programs (its num_warmup_samples); xgb-nowarmup: the same from the start;
- draft: the analytic draft score, calibrated per loop structure by the measured programs;
- pacm-E: PaCM from --checkpoint with guarded online training, E epochs per batch (tune's
  default is 5); pacm-E+treesN: the same with tune's --in-task-trees N.
The programs after k are what the run's own search chose to measure, so each model ranks a set
that a search already found promising (a random order scores a first-pick ratio of ~0.5 on it);
compare models over the same runs only.
"""

from __future__ import annotations

import argparse
import logging
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

REPO = Path(__file__).resolve().parents[1]


def measured_programs(run: Path):
    """(target kind, [(MeasureCandidate, seconds)] in measuring order); failed measurements left out."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate

    from pruner_offline.sources.metaschedule import MetaScheduleSource

    source = MetaScheduleSource(run)
    units = source.units()
    if len(units) != 1:
        raise SystemExit(f"{run}: {len(units)} workloads; one tuning run of one workload is expected")
    got = source.programs(units[0])
    out = []
    for p in sorted(got.programs, key=lambda p: p.position):
        if p.ok and p.func is not None:
            out.append((MeasureCandidate(p.func, ArgInfo.from_prim_func(p.func.mod["main"])), p.cost))
    return got.target_kind, out


def make_model(name: str, checkpoint: Path, kind: str, cores: int):
    from tvm.s_tir import meta_schedule as ms

    from pruner_offline.tuning.cost_model.pruner import PrunerCostModel
    from pruner_offline.tuning.cost_model.in_task import InTaskTrees
    from pruner_offline.tuning.cost_model.online import AdaptUpdate

    if name == "xgb":
        return ms.cost_model.XGBModel(num_tuning_cores=cores)
    if name == "xgb-nowarmup":
        return ms.cost_model.XGBModel(num_tuning_cores=cores, num_warmup_samples=0)
    if name == "draft":
        return PrunerCostModel.from_checkpoint(checkpoint, target_kind=kind)
    if name.startswith("pacm-"):
        epochs, _, trees = name[5:].partition("+trees")
        return PrunerCostModel.from_checkpoint(checkpoint, target_kind=kind,
                                               on_update=AdaptUpdate("guarded", epochs=int(epochs), seed=0),
                                               in_task=InTaskTrees(int(trees)) if trees else None)
    raise SystemExit(f"unknown model {name}")


def scores_of(name: str, model, context, programs: list) -> np.ndarray:
    if name == "draft":
        return np.asarray(model.draft_ranks(programs))
    if name.startswith("pacm-"):  # the verifier (with its trees where given), as it orders the draft's survivors
        return np.nan_to_num(model._verify(programs, np.arange(len(programs))), nan=-np.inf)
    return np.asarray(model.predict(context, programs))


def main() -> None:
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    from pruner_offline.targets import tuning_target
    from pruner_offline.tuning.context import make_context

    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--checkpoint", type=Path, default=REPO / "checkpoints" / "pacm.pt")
    ap.add_argument("--models", nargs="+", default=["xgb", "xgb-nowarmup", "draft", "pacm-5", "pacm-5+trees32"])
    ap.add_argument("--at", type=int, nargs="+", default=[32, 64, 96, 128, 160, 192])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--cores", type=int, default=2)
    args = ap.parse_args()

    results: dict = defaultdict(lambda: defaultdict(list))  # model -> k -> [(tau, first pick)]
    for run in args.runs:
        kind, measured = measured_programs(run)
        if not measured:
            print(f"{run}: no measured program")
            continue
        lat = np.array([c for _, c in measured])
        context = make_context(measured[0][0].sch.mod, tuning_target(kind, args.cores), num_threads=args.cores,
                               seed=0, logger=logging.getLogger("intask"))
        for name in args.models:
            model = make_model(name, args.checkpoint, kind, args.cores)
            for start in range(0, max(args.at), args.batch):
                batch = measured[start:start + args.batch]
                model.update(context, [c for c, _ in batch], [RunnerResult([s], None) for _, s in batch])
                if hasattr(model, "learn"):  # ours learns a batch when next verifying, as tuning does each batch
                    model.learn()
                k = start + len(batch)
                if k in args.at and len(measured) - k >= 2:
                    rest = lat[k:]
                    scores = scores_of(name, model, context, [c for c, _ in measured[k:]])
                    first = rest.min() / rest[int(np.argmax(scores))]
                    results[name][k].append((float(kendalltau(scores, -rest).statistic), float(first)))
        print(f"{run.name}: {len(measured)} measured programs", flush=True)

    ks = sorted({k for by_k in results.values() for k in by_k})
    for title, i in (("Kendall's tau of the scores of the programs measured after k (mean over runs)", 0),
                     ("best latency after k / latency of the model's first pick (mean over runs)", 1)):
        print(f"\n{title}\n{'model':<14}" + "".join(f"{f'k={k}':>9}" for k in ks) + f"{'mean':>9}{'runs':>6}")
        for name in args.models:
            cells = [statistics.mean(v[i] for v in results[name][k]) if results[name][k] else float("nan")
                     for k in ks]
            runs = min((len(results[name][k]) for k in ks), default=0)
            print(f"{name:<14}" + "".join(f"{c:>9.3f}" for c in cells) + f"{np.nanmean(cells):>9.3f}{runs:>6}")


if __name__ == "__main__":
    main()
