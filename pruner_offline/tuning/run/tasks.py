"""The one tuning driver: tasks -> one TuneContext each, all sharing one cost model -> MetaSchedule's
tune_tasks with our builder and runner, continuing what the work directory's database holds
(resume.py). workload.py (one kernel) and network.py (a network's kernels) hand their tasks to it,
as TVM's tir_integration and relax_integration both hand theirs to tune_tasks.
"""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import tvm
from tvm.s_tir import meta_schedule as ms

from ...devices import DEVICES, DeviceConstants
from ...host_device import HOST, host_cpu
from ...measure.measurers import check_measurable, run_measurers
from ...models.registry import MODELS
from ...targets import tuning_target
from ..context import make_context
from ..cost_model.timed import TimedCostModel
from ..settings import COST_MODELS, TuneSettings
from .logs import run_logger, tuning_loggers
from .resume import PastTrials, learn_past, open_database, past_trials


@dataclass(frozen=True)
class Task:
    name: str
    mod: tvm.IRModule  # one PrimFunc, main
    weight: float = 1.0  # how many times its network calls it


def search_device(s: TuneSettings, learned_draft: bool) -> str | DeviceConstants | None:
    """The constants the analytic draft ranks a search with: --search-device by name; "host", or
    by default a CPU run measured on this machine, those of this machine read from the OS; else the
    model's (None). A learned draft model reads the constants it was trained with."""
    name = s.pruner.search_device
    measured_here = s.target_kind == "llvm" and s.measure.rpc is None
    if name == HOST or (name is None and measured_here and not learned_draft):
        if not measured_here:
            raise ValueError(f"--search-device {HOST} reads this machine, but the programs are measured "
                             f"{'through --rpc-tracker' if s.measure.rpc else 'on a GPU'}: name the device measured")
        return host_cpu(s.num_cores)
    return name


def make_cost_model(s: TuneSettings) -> ms.cost_model.CostModel:
    if s.cost_model == "pruner":
        from ..cost_model.pruner import PrunerCostModel
        from ..cost_model.in_task import make_in_task
        from ...adapt.config import ONLINE_METHODS
        from ..cost_model.online import AdaptUpdate

        p = s.pruner
        model = PrunerCostModel.from_checkpoint(
            s.checkpoint, p.draft, target_kind=s.target_kind, device=s.device, verify_fraction=p.verify_fraction,
            verify_max=p.verify_max, calibrate=p.calibrate, calibrate_unmeasured=p.calibrate_unmeasured,
            in_task=make_in_task(p.in_task_trees, s.seed),
            search_device=search_device(s, learned_draft=p.draft is not None),
            on_update=(AdaptUpdate(ONLINE_METHODS[p.online_method], epochs=p.online_epochs, seed=s.seed or 0)
                       if p.online_epochs else None))
        searched = model.search_device
        if not searched.is_gpu and model.draft is None and searched.num_units != s.num_cores:
            # the analytic score prefers programs that fill its core count: on fewer cores they wait
            warnings.warn(f"the draft score ranks this search with the constants of {searched.name} "
                          f"({searched.num_units} cores) for a run on {s.num_cores}: give --search-device "
                          f"the constants of the machine measured, one of "
                          f"{', '.join(n for n, d in sorted(DEVICES.items()) if not d.is_gpu)}", stacklevel=2)
        return model
    if s.cost_model == "xgb":
        if importlib.util.find_spec("xgboost") is None:  # XGBModel would only fail at its first update
            raise ValueError("--cost-model xgb needs xgboost: pip install 'pruner-offline[xgb]'")
        return ms.cost_model.XGBModel(num_tuning_cores=s.num_cores)
    if s.cost_model in MODELS and MODELS[s.cost_model].scores_in_tune:
        # A baseline model file scores every candidate. Not MetaSchedule's MLPModel: it needs
        # pretraining on a database of many workloads (its update() fails on one), which is what
        # our model files are.
        from ..cost_model.pruner import PrunerCostModel

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
    (search/draft_verify.py), MetaSchedule's evolutionary search (None) otherwise."""
    if s.cost_model != "pruner" or s.pruner.search != "draft-then-verify" or model.verifier is None:
        return None
    from ..search.draft_verify import DraftThenVerifySearch

    return DraftThenVerifySearch(model, population_size=s.population_size, survivors=s.pruner.verify_max,
                                 structure_cap=s.pruner.structure_cap, explore=s.pruner.explore,
                                 verify_pool_after=s.pruner.verify_pool_after)


def run_target(s: TuneSettings) -> tvm.target.Target:
    """cuda: built for --device's GPU where one is named (it may be measured through RPC, elsewhere)."""
    return tuning_target(s.target_kind, s.num_cores, s.device if s.target_kind == "cuda" else None)


class TuningRun:
    """A run over tasks, prepared: the cost model built, the work directory's database opened
    and what earlier runs measured in it counted (``past``, one per task). ``tune`` measures what
    is left of s.trials in all."""

    def __init__(self, tasks: list[Task], work_dir: Union[str, Path], s: TuneSettings, quiet: bool = False):
        check_measurable(s.target_kind, s.measure, "tune")
        self.settings = s
        self.tasks = tasks
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.target = run_target(s)
        loggers = tuning_loggers(self.work_dir, [t.name for t in tasks], quiet)
        self.database, notes = open_database(self.work_dir)
        for note in notes:
            run_logger().warning(note)
        self.model = TimedCostModel(make_cost_model(s))  # one model learns from every task's measurements
        self.contexts = [make_context(t.mod, self.target, num_threads=s.num_cores,
                                      seed=None if s.seed is None else s.seed + i, logger=logger,
                                      population_size=s.population_size, task_name=t.name,
                                      strategy=make_strategy(s, self.model.inner))
                         for i, (t, logger) in enumerate(zip(tasks, loggers))]
        self.past: list[PastTrials] = past_trials(self.database, self.contexts)
        self.resumed = sum(p.trials for p in self.past)
        if self.resumed:
            run_logger().info("resuming: %d trials measured before in %s, %d left of --trials %d", self.resumed,
                              self.work_dir, max(s.trials - self.resumed, 0), s.trials)

    def tune(self, callbacks: list[ms.measure_callback.MeasureCallback],
             scheduler: Union[str, ms.task_scheduler.TaskScheduler]) -> None:
        """callbacks run after MetaSchedule's own, so they see each batch's update done."""
        left = self.settings.trials - self.resumed
        if left <= 0:
            return
        for context, p in zip(self.contexts, self.past):
            learn_past(self.model, context, p)
        with run_measurers(self.settings.measure) as (builder, runner):
            ms.tune.tune_tasks(
                tasks=self.contexts, task_weights=[float(t.weight) for t in self.tasks], work_dir=str(self.work_dir),
                max_trials_global=left, num_trials_per_iter=self.settings.trials_per_batch, builder=builder,
                runner=runner, database=self.database, cost_model=self.model,
                measure_callbacks=ms.measure_callback.MeasureCallback.create("default") + callbacks,
                task_scheduler=scheduler)
