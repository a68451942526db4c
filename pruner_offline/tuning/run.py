"""One MetaSchedule tuning run with a chosen cost model, and its report."""

from __future__ import annotations

import importlib.util
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import tvm
from tvm.s_tir import meta_schedule as ms

from ..errors import dumps
from ..features.devices import DEVICES
from ..targets import tuning_target
from ..measure.session import check_measurable, run_measurers
from .settings import COST_MODELS, TuneSettings
from .context import make_context
from .logs import run_logger, tuning_loggers
from .resume import learn_past, open_database, past_trials
from .timing import LatencyCurve, TimedCostModel


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


def make_cost_model(s: TuneSettings) -> ms.cost_model.CostModel:
    if s.cost_model == "pruner":
        from .cost_model import PrunerCostModel
        from .in_task import make_in_task
        from .online import ONLINE_METHODS, AdaptUpdate

        model = PrunerCostModel.from_checkpoint(
            s.checkpoint, s.draft, target_kind=s.target_kind, device=s.device, verify_fraction=s.verify_fraction,
            verify_max=s.verify_max, calibrate=s.calibrate, in_task=make_in_task(s.in_task_trees, s.seed),
            search_device=s.search_device,
            on_update=(AdaptUpdate(ONLINE_METHODS[s.online_method], epochs=s.online_epochs, seed=s.seed or 0)
                       if s.online_epochs else None))
        searched = model.search_device
        if not searched.is_gpu and model.draft is None and searched.num_units != s.num_cores:
            # the analytic score prefers programs that fill its core count: on fewer cores they wait
            warnings.warn(f"the draft score ranks this search with the constants of {searched.name} "
                          f"({searched.num_units} cores) for a run on {s.num_cores}: give --search-device "
                          f"the constants of this machine, one of "
                          f"{', '.join(n for n, d in sorted(DEVICES.items()) if not d.is_gpu)}", stacklevel=2)
        return model
    if s.cost_model == "xgb":
        if importlib.util.find_spec("xgboost") is None:  # XGBModel would only fail at its first update
            raise ValueError("--cost-model xgb needs xgboost: pip install 'pruner-offline[xgb]'")
        return ms.cost_model.XGBModel(num_tuning_cores=s.num_cores)
    if s.cost_model in ("mlp", "gbdt"):
        # A baseline model file scores every candidate. Not MetaSchedule's MLPModel: it needs
        # pretraining on a database of many workloads (its update() fails on one), which is what
        # our model files are.
        from .cost_model import PrunerCostModel

        if not s.checkpoint:
            raise ValueError(f"--cost-model {s.cost_model} needs --checkpoint: a model file of pretrain "
                             f"--model {s.cost_model}")
        model = PrunerCostModel.from_checkpoint(s.checkpoint, target_kind=s.target_kind, device=s.device,
                                                verify_fraction=1.0)
        if model.verifier.hparams.model != s.cost_model:
            raise ValueError(f"{s.checkpoint} is a {model.verifier.hparams.model} model, not {s.cost_model}")
        return model
    if s.cost_model == "random":
        return ms.cost_model.RandomModel(seed=s.seed)
    raise ValueError(f"unknown cost model {s.cost_model!r}; choose from {', '.join(COST_MODELS)}")


def make_strategy(s: TuneSettings, model: ms.cost_model.CostModel) -> Optional[ms.search_strategy.SearchStrategy]:
    """The search of one task: draft-then-verify inside the search for ours with a verifier
    (search.py), MetaSchedule's evolutionary search (None) otherwise."""
    if s.cost_model != "pruner" or s.search != "draft-then-verify" or model.verifier is None:
        return None
    from .search import DraftThenVerifySearch

    return DraftThenVerifySearch(model, population_size=s.population_size, survivors=s.verify_max,
                                 structure_cap=s.structure_cap, explore=s.explore)


def cost_seconds(model: TimedCostModel, cpu: bool = False) -> float:
    """Inside predict and update, and inside our model when a search strategy calls it directly;
    wall time, or with cpu this process's CPU time."""
    times = getattr(model.inner, "times", None)
    direct = 0.0 if times is None else times.search_cpu_s if cpu else times.search_s
    return round((model.cpu_s if cpu else model.predict_s + model.update_s) + direct, 4)


def cost_breakdown(model: TimedCostModel) -> dict[str, float]:
    out = {"predict_s": model.predict_s, "update_s": model.update_s}
    inner = model.inner
    if hasattr(inner, "times"):  # ours: where the time inside went
        out |= {f"model_{k}": v for k, v in asdict(inner.times).items()}
        out |= {f"features_{k}": v for k, v in asdict(inner.features.times).items()}
        out |= {f"templates_{k}": v for k, v in asdict(inner.features.templates.times).items()}
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def tune(mod: tvm.IRModule, workload: str, work_dir: str | Path, s: TuneSettings, quiet: bool = False) -> TuneReport:
    """Tune `mod` (one PrimFunc named main) until work_dir's database holds s.trials trials of it:
    a rerun continues an earlier run (resume.py). ``quiet``: MetaSchedule's progress only in
    work_dir's logs (tuning_loggers)."""
    check_measurable(s.target_kind, s.measure, "tune")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    target = tuning_target(s.target_kind, s.num_cores)
    logger = tuning_loggers(work_dir, ["main"], quiet)[0]
    database, notes = open_database(work_dir)
    for note in notes:
        run_logger().warning(note)
    model = TimedCostModel(make_cost_model(s))
    context = make_context(mod, target, num_threads=s.num_cores, seed=s.seed, logger=logger,
                           population_size=s.population_size, strategy=make_strategy(s, model.inner))
    past, = past_trials(database, [context])
    left = s.trials - past.trials
    if past.trials:
        run_logger().info("resuming: %d trials measured before in %s, %d left of --trials %d", past.trials, work_dir,
                          max(left, 0), s.trials)
    start = time.perf_counter()
    curve = LatencyCurve(start, cost=lambda: cost_seconds(model), past_best_s=past.best_s, past_trials=past.trials)
    if left > 0:
        learn_past(model, context, past)
        with run_measurers(s.measure) as (builder, runner):
            ms.tune.tune_tasks(
                tasks=[context], task_weights=[1.0], work_dir=str(work_dir), max_trials_global=left,
                num_trials_per_iter=s.trials_per_batch, builder=builder, runner=runner,
                database=database, cost_model=model,
                measure_callbacks=ms.measure_callback.MeasureCallback.create("default") + [curve],
                task_scheduler="round-robin")
    best = curve.best_s[-1] if curve.best_s else past.best_s
    return TuneReport(
        workload=workload, target=s.target_kind, cost_model=s.cost_model,
        trials=curve.trials[-1] if curve.trials else past.trials, resumed_trials=past.trials,
        best_latency_s=best if best < float("inf") else None,  # JSON has no Infinity
        best_latency_per_batch=curve.best_s, batch_end_seconds=[round(t, 3) for t in curve.elapsed_s],
        trials_per_batch=curve.trials, search_seconds=round(time.perf_counter() - start, 3),
        cost_model_seconds=cost_seconds(model), cost_model_seconds_per_batch=curve.cost_s, cost_model_cpu_seconds=cost_seconds(model, cpu=True),
        cost_model_breakdown=cost_breakdown(model),
        seed=s.seed, work_dir=str(work_dir))
