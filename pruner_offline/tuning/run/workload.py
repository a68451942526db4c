"""One MetaSchedule tuning run of one workload with a chosen cost model, and its report."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import tvm

from ...errors import dumps
from ..cost_model.timed import cost_breakdown, cost_seconds
from ..measure_callback.curves import LatencyCurve
from ..settings import TuneSettings
from .tasks import Task, TuningRun


@dataclass(frozen=True)
class TuneReport:
    workload: str
    target: str
    cost_model: str
    trials: int
    best_latency_s: Optional[float]  # None when no candidate ran
    best_latency_per_batch: list[float]  # seconds, best so far after each measured batch
    batch_end_seconds: list[float]  # search seconds at the end of each batch
    trials_per_batch: list[int]  # cumulative trials after each batch
    search_seconds: float
    cost_model_seconds: float  # inside predict + update, and the draft/verify calls of our search strategy
    cost_model_seconds_per_batch: list[float]  # the same, so far, after each measured batch
    cost_model_cpu_seconds: float  # the same in this process's CPU time, which other jobs inflate less
    cost_model_breakdown: dict[str, float]
    seed: Optional[int]
    work_dir: str
    resumed_trials: int = 0  # measured by earlier runs of work_dir (resume.py), counted in trials and the bests

    def to_json(self) -> str:
        """One JSON object; a latency never measured (no trial ran) is null."""
        return dumps(asdict(self), sort_keys=True)


def tune(mod: tvm.IRModule, workload: str, work_dir: str | Path, s: TuneSettings, quiet: bool = False) -> TuneReport:
    """Tune `mod` (one PrimFunc named main) until work_dir's database holds s.trials trials of it:
    a rerun continues an earlier run (resume.py). ``quiet``: MetaSchedule's progress only in
    work_dir's logs (tuning_loggers)."""
    run = TuningRun([Task("main", mod)], work_dir, s, quiet)
    model, (past,) = run.model, run.past
    start = time.perf_counter()
    curve = LatencyCurve(start, cost=lambda: cost_seconds(model), past_best_s=past.best_s, past_trials=past.trials)
    run.tune([curve], "round-robin")
    best = curve.best_s[-1] if curve.best_s else past.best_s
    return TuneReport(
        workload=workload, target=s.target_kind, cost_model=s.cost_model,
        trials=curve.trials[-1] if curve.trials else past.trials, resumed_trials=past.trials,
        best_latency_s=best if best < float("inf") else None,  # JSON has no Infinity
        best_latency_per_batch=curve.best_s, batch_end_seconds=[round(t, 3) for t in curve.elapsed_s],
        trials_per_batch=curve.trials, search_seconds=round(time.perf_counter() - start, 3),
        cost_model_seconds=cost_seconds(model), cost_model_seconds_per_batch=curve.cost_s,
        cost_model_cpu_seconds=cost_seconds(model, cpu=True), cost_model_breakdown=cost_breakdown(model),
        seed=s.seed, work_dir=str(run.work_dir))
