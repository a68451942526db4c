"""Settings of a tuning run (no TVM import: the command line is built from them)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from ..adapt.config import ONLINE_METHODS
from ..measure.settings import MeasureSettings
from ..models.registry import MODELS
from .cost_model.calibration import UNMEASURED

# ours (draft-then-verify), MetaSchedule's XGB, a model file of a baseline scoring every candidate,
# MetaSchedule's random model
COST_MODELS = ("pruner", "xgb", *(n for n, spec in MODELS.items() if spec.scores_in_tune), "random")
SEARCHES = ("draft-then-verify", "evolutionary")


def available_cores() -> int:
    """The cores this process may run on (its affinity mask, which containers and batch systems
    narrow), as MetaSchedule counts them for a target's num-cores."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class PrunerSettings:
    """What only ``--cost-model pruner`` reads: the draft, how far PaCM verifies, the search, the
    in-run learning. On the command line its fields are options of tune like any other."""

    draft: Optional[str] = field(default=None, metadata={
        "help": "pruner: learned draft model file (default: the analytic draft score; on CPUs keep it: a learned "
                "CPU draft model has not ranked unseen networks measurably better, see the README)"})
    verify_fraction: float = field(default=0.2, metadata={"help": "pruner, --search evolutionary: share of each scored population PaCM re-ranks",
                                                          "above": 0.0, "max": 1.0})
    verify_max: int = field(default=32, metadata={
        "help": "pruner: PaCM re-ranks this many survivors of the draft-driven search per measured batch "
                "(--search evolutionary: at most this many of every scored population)", "min": 1})
    structure_cap: int = field(default=4, metadata={
        "help": "pruner, draft-then-verify: at most this many candidates of one loop structure in a measured batch "
                "while other structures have candidates (PaCM's shortlist spreads the same way); 0: the draft's "
                "order alone", "min": 0})
    # 2 by default: over bench/tune.py's 6 workloads x 3 seeds (with calibration) the best-latency ratio
    # to XGB at 64 trials went from 0.95 to 0.99, and 12 runs instead of 7 reached XGB's final latency
    explore: int = field(default=2, metadata={
        "help": "pruner, draft-then-verify: candidates per measured batch drawn at random from loop structures "
                "not measured yet, in place of PaCM's last picks", "min": 0})
    # on by default: over bench/tune.py's 6 workloads x 3 seeds (with --structure-cap 4) the
    # best-latency ratio to XGB at 32 / 64 trials went from 0.91 / 0.88 to 0.99 / 0.95
    calibrate: bool = field(default=True, metadata={
        "help": "pruner, analytic draft: divide each loop structure's draft score by how far it was off on the "
                "structure's measured programs"})
    calibrate_unmeasured: str = field(default="median", metadata={
        "choices": UNMEASURED,
        "help": "pruner, --calibrate: what a loop structure not measured yet is divided by: the median factor of the "
                "measured structures, or the least (the measured ones are those the draft rated highest, so their "
                "median carries its over-rating of them)"})
    search: str = field(default="draft-then-verify", metadata={
        "choices": SEARCHES,
        "help": "pruner with --checkpoint: draft-then-verify (the draft model scores every generation of "
                "MetaSchedule's evolutionary search, PaCM only the survivors, once per batch) or evolutionary "
                "(MetaSchedule's search calls our cost model, which drafts and verifies every generation)"})
    # on by default: over bench/tune.py's 6 workloads x 3 seeds, guarded online updates took the
    # best-latency ratio to XGB from 0.93 to 1.01 at 32 trials and 0.86 to 0.99 at 64
    online_epochs: int = field(default=5, metadata={
        "help": "pruner: retrain PaCM on the programs measured so far, this many epochs after each batch "
                "(--online-method decides what predicts; 0: the checkpoint as it is)", "min": 0})
    online_method: str = field(default="guarded", metadata={
        "choices": tuple(ONLINE_METHODS),
        "help": "with --online-epochs: guarded (leave the pretrained model for a mix or a fine-tune only as "
                "far as fresh measurements support; plain retraining once it ranks them like a coin), plain "
                "retraining of a copy, or MoA (momentum online adaptation)"})
    # 64 by default: a run of up to 64 trials never uses the trees (and fits none); in bench/intask.py
    # the sum of ranks ordered a run's later programs better than PaCM alone at every point measured
    in_task_trees: int = field(default=64, metadata={
        "help": "pruner: from this many measured programs on, order PaCM's candidates by its ranks plus those "
                "of gradient-boosted trees refitted on the run's measured programs after every batch "
                "(tuning/cost_model/in_task.py); 0: PaCM alone", "min": 0})
    # off by default: one seed of bench/tune.py's 8 kernels at 256 trials moved XGB / ours from 1.067 to
    # 1.072 (docs/benchmarks.md §1.0), within what seeds move it
    verify_pool_after: int = field(default=0, metadata={
        "help": "pruner, draft-then-verify: from this many measured programs on, PaCM (with the in-task trees) orders "
                "the search's whole pool, not only the draft's best --verify-max of it; 0: never", "min": 0})
    search_device: Optional[str] = field(default=None, metadata={
        "help": "pruner, analytic draft: device constants the draft score ranks the search with: a named "
                "device, or host (this machine's, read from the OS: cores, SIMD, cache, clock, a measured "
                "bandwidth). Default: host for llvm measured here, else the model's; PaCM keeps reading the "
                "score made with its own"})

    def __post_init__(self) -> None:
        if self.verify_max < 1:
            raise ValueError(f"verify_max must be at least 1, not {self.verify_max}")
        if not 0 < self.verify_fraction <= 1:
            raise ValueError(f"verify_fraction must lie in (0, 1], not {self.verify_fraction}")


@dataclass(frozen=True)
class TuneSettings:
    target_kind: str = field(default="llvm", metadata={
        "flag": "--target", "choices": ("llvm", "cuda"), "help": "cuda needs a visible GPU to measure on, or --rpc-tracker"})
    trials: int = field(default=64, metadata={"help": "measured candidates in all", "min": 1})
    cost_model: str = field(default="pruner", metadata={"choices": COST_MODELS, "help": "who ranks the candidates"})
    checkpoint: Optional[str] = field(default=None, metadata={
        "help": "pruner: PaCM model file, the verifier (without it, the draft order alone); "
                "mlp, gbdt: a model file of that kind, which scores every candidate (required)"})
    trials_per_batch: int = field(default=16, metadata={"help": "candidates measured per batch", "min": 1})
    population_size: int = field(default=512, metadata={"flag": "--population", "min": 2,
                                                         "help": "evolutionary search population"})
    num_cores: int = field(default_factory=available_cores, metadata={
        "flag": "--cores", "min": 1, "help": "target num-cores and build workers (default: the cores this process may use)"})
    seed: Optional[int] = field(default=None, metadata={"help": "search seed (default: random)", "min": 0})
    device: Optional[str] = field(default=None, metadata={
        "help": "device constants of the draft score (default: those the model was trained with); cuda: also "
                "the GPU built for, by name (its arch), which --rpc-tracker may measure elsewhere"})
    pruner: PrunerSettings = field(default_factory=PrunerSettings)
    measure: MeasureSettings = field(default_factory=MeasureSettings)

    def __post_init__(self) -> None:  # the same bounds for callers from Python as on the command line
        for name in ("trials", "trials_per_batch", "population_size", "num_cores"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
