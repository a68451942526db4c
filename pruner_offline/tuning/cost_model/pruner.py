"""Our models as a MetaSchedule cost model: draft model ranks every candidate, PaCM verifies the best.

Load/save are the toolkit's model files (training/export.py) for the verifier, the model that
online training changes; the draft model is fixed for the run.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel
from tvm.s_tir.meta_schedule.runner import RunnerResult
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate

from ...features import FEATURE_SCHEMA_VERSION, DeviceConstants
from ...devices import device_for, device_to_json
from ...features.extract import ProgramFeatures
from ...tenset.labels import FAILED_COST
from ...features.schema import extractable_schemas
from ...training.export import export_model, load_model, model_device, model_schema
from ...training.module import CostModelModule
from .calibration import StructureCalibration
from .candidates import CandidateFeatures, draft_batch, features_batch
from .in_task import InTaskTrees
from .ranking import draft_then_verify
from ...measure.outcome import measured_seconds

# Called once per measured batch, when the verifier is next needed (PrunerCostModel.learn), with the
# current verifier and every program measured so far: features, costs in seconds (FAILED_COST for failed
# runs) and the task of each (its workload's structural hash: one tuning run of a network measures many
# tasks, and a latency means something only against the same task's); returns the verifier to use from
# now on, or None to keep it. online.AdaptUpdate runs plain retraining or MoA this way.
OnlineUpdate = Callable[[Optional[CostModelModule], list[ProgramFeatures], np.ndarray, list[str]],
                        Optional[CostModelModule]]


def load_checkpoint(path: str | Path) -> CostModelModule:
    module, _ = load_model(path, expect_schema=extractable_schemas())
    return module


@dataclass
class CostModelTimes:
    predict_s: float = 0.0
    update_s: float = 0.0
    predict_calls: int = 0
    candidates: int = 0
    draft_model_s: float = 0.0  # forward passes, featurization excluded
    verify_model_s: float = 0.0  # the verifier's forward passes, and the in-task trees' fits and predictions
    online_s: float = 0.0
    updates: int = 0
    search_s: float = 0.0  # draft and verify calls of a search strategy (search/draft_verify.py), not through predict
    search_cpu_s: float = 0.0  # the same calls' process CPU time

    @contextmanager
    def search_call(self):
        """Adds a search strategy's direct call to search_s and search_cpu_s."""
        start, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.search_s += time.perf_counter() - start
            self.search_cpu_s += time.process_time() - cpu


@dataclass
class MeasuredPrograms:
    features: list[ProgramFeatures] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)  # see OnlineUpdate


def task_key(context) -> str:
    """The task a TuneContext tunes, as MetaSchedule's XGB model groups its data: the structural
    hash of the workload."""
    mod = getattr(context, "mod", None)
    return "task" if mod is None else str(tvm_ffi.structural_hash(mod))


@contextmanager
def _one_torch_thread():
    # The models are tiny, and torch's OpenMP threads fight MetaSchedule's own thread pool (and the
    # runner measuring in the background) for the cores: forwards took ~100x longer with 2 threads.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _mean_cost(result: RunnerResult) -> float:
    """measured_seconds, with FAILED_COST for a candidate that failed (labels must stay finite)."""
    secs = measured_seconds(result)
    return secs if np.isfinite(secs) else FAILED_COST


@derived_object
class PrunerCostModel(PyCostModel):
    """verifier: PaCM (or any CostModelModule over full features), None for draft order alone.
    draft: a learned draft model; None ranks by the analytic draft score.
    verify_fraction: share of each scored population that the verifier re-ranks; verify_max: at most
    this many per population (full features cost ~10x the draft inputs: verifying a fifth of every
    generation's 512 programs cost more than everything else in a tuning run), None for no limit.
    on_update: online training, see OnlineUpdate; None keeps the verifier as loaded.
    calibrate: divide the analytic draft score of each loop structure by how far it was off on that
    structure's measured programs (calibration.py); no effect with a learned draft model.
    calibrate_unmeasured: what a structure not measured yet is divided by (calibration.UNMEASURED).
    num_threads: threads for the native part of full features; None takes the tuning run's own
    (its TuneContext's, as MetaSchedule's XGB model does for the same extractor) once one is seen.
    in_task: trees fitted on the run's measured programs after each batch, whose ranks are added to
    the verifier's once fitted (in_task.py); None: the verifier alone.
    search_device: the device constants the analytic draft score ranks the search with, where they
    differ from the models' (the machine tuned on, where the checkpoint was trained on records of
    another: its score counts that machine's cores); the verifier still reads the score made with
    its own constants. None: the models' constants."""

    def __init__(self, *, target_kind: str, verifier: Optional[CostModelModule] = None,
                 draft: Optional[CostModelModule] = None, device: str | DeviceConstants | None = None,
                 verify_fraction: float = 0.2, verify_max: Optional[int] = None,
                 on_update: Optional[OnlineUpdate] = None, calibrate: bool = True,
                 calibrate_unmeasured: str = "median", num_threads: Optional[int] = None,
                 in_task: Optional[InTaskTrees] = None, search_device: str | DeviceConstants | None = None):
        super().__init__()
        if not 0 < verify_fraction <= 1:
            raise ValueError(f"verify_fraction must be in (0, 1], got {verify_fraction}")
        self.verifier = verifier.eval() if verifier is not None else None
        self.draft = draft.eval() if draft is not None else None
        self.verify_fraction = verify_fraction
        self.verify_max = verify_max
        self.on_update = on_update
        self.in_task = in_task
        self.device = device_for(target_kind, device)
        self.search_device = self.device if search_device is None else device_for(target_kind, search_device)
        if draft is not None and self.search_device != self.device:
            raise ValueError(f"a learned draft model reads the draft score made with the constants it was "
                             f"trained with ({self.device.name}); other constants for the search "
                             f"({self.search_device.name}) apply to the analytic draft score only")
        self.num_threads = num_threads
        # full features as the verifier was trained on them (the draft inputs are the same in every
        # extractable schema: they leave out the per-store columns)
        schema = model_schema(verifier) if verifier is not None else FEATURE_SCHEMA_VERSION
        self.features = CandidateFeatures(target_kind, self.device, num_threads=num_threads or 1,
                                          search_device=self.search_device, schema=schema)
        self.measured = MeasuredPrograms()
        self._unlearned: list[tuple[list, list[RunnerResult], str]] = []  # measured batches, see learn()
        self.calibration = StructureCalibration(calibrate_unmeasured) if calibrate and self.draft is None else None
        self.times = CostModelTimes()

    @classmethod
    def from_checkpoint(cls, checkpoint: str | Path | None, draft: str | Path | None = None, *,
                        target_kind: str = "llvm", device: str | DeviceConstants | None = None,
                        verify_fraction: float = 0.2, verify_max: Optional[int] = None,
                        on_update: Optional[OnlineUpdate] = None, calibrate: bool = True,
                        calibrate_unmeasured: str = "median", num_threads: Optional[int] = None,
                        in_task: Optional[InTaskTrees] = None, search_device: str | DeviceConstants | None = None) -> "PrunerCostModel":
        """Load model files written by ``pruner-train pretrain``; the draft score uses the device
        constants the models were trained with (``device`` may only confirm them)."""
        models = {str(p): load_model(p, expect_schema=extractable_schemas()) for p in (checkpoint, draft) if p}
        dev = model_device(target_kind, {p: meta for p, (_, meta) in models.items()}, device)
        return cls(target_kind=target_kind, device=dev, verify_fraction=verify_fraction, verify_max=verify_max,
                   on_update=on_update, calibrate=calibrate, calibrate_unmeasured=calibrate_unmeasured,
                   num_threads=num_threads, in_task=in_task,
                   search_device=search_device, verifier=models[str(checkpoint)][0] if checkpoint else None,
                   draft=models[str(draft)][0] if draft else None)

    def use_context(self, context) -> None:
        """Take the tuning run's thread count, unless one was given."""
        if self.num_threads is None and context is not None:
            self.features.num_threads = max(1, int(context.num_threads))

    def load(self, path: str) -> None:
        self.verifier = load_checkpoint(path)
        self.features.use_schema(model_schema(self.verifier, path))

    def save(self, path: str) -> None:
        self.learn()
        if self.verifier is None:
            raise ValueError("no verifier to save: this cost model ranks by the draft model alone")
        export_model(self.verifier, path, meta={"source": "pruner_offline.tuning (online-updated verifier)",
                                                "devices": {self.features.target_kind: device_to_json(self.device)}})

    def _draft_scores(self, candidates: list[MeasureCandidate]) -> np.ndarray:
        drafts = self.features.draft([c.sch for c in candidates])
        scores = np.full(len(drafts), np.nan)
        valid = [i for i, d in enumerate(drafts) if d is not None]
        if not valid:
            return scores
        if self.draft is None:
            scores[valid] = [drafts[i].draft_score for i in valid]
            if self.calibration is not None:
                scores[valid] = self.calibration.scores([drafts[i].structure for i in valid], scores[valid])
            return scores
        start = time.perf_counter()
        with torch.no_grad():
            scores[valid] = self.draft(draft_batch([drafts[i] for i in valid])).numpy()
        self.times.draft_model_s += time.perf_counter() - start
        return scores

    def _verify(self, candidates: list[MeasureCandidate], indices: np.ndarray) -> np.ndarray:
        self.learn()
        feats = self.features.full([candidates[i].sch for i in indices])
        scores = np.full(len(indices), np.nan)
        valid = [j for j, f in enumerate(feats) if f is not None]
        if valid:
            start = time.perf_counter()
            valid_feats = [feats[j] for j in valid]
            with torch.no_grad():
                scores[valid] = self.verifier(features_batch(valid_feats)).numpy()
            if self.in_task is not None:
                scores[valid] = self.in_task.combined(valid_feats, scores[valid])
            self.times.verify_model_s += time.perf_counter() - start
        return scores

    def structures(self, candidates: list[MeasureCandidate]) -> np.ndarray:
        """Per candidate an id of its loop structure (search/spread.py); each one the draft stage cannot
        read gets an id of its own."""
        drafts = self.features.draft([c.sch for c in candidates])
        return np.array([hash((i,)) if d is None else d.structure for i, d in enumerate(drafts)], dtype=np.int64)

    def draft_ranks(self, candidates: list[MeasureCandidate]) -> np.ndarray:
        """The draft stage alone, as predict() scores it when nothing is verified."""
        with _one_torch_thread():
            return draft_then_verify(self._draft_scores(candidates), self.verify_fraction, None)

    def verified_order(self, candidates: list[MeasureCandidate]) -> np.ndarray:
        """Indices of the candidates, best first by the verifier (those it cannot score last, in
        the order given)."""
        with _one_torch_thread():
            scores = self._verify(candidates, np.arange(len(candidates)))
        return np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")

    def predict(self, context, candidates: list[MeasureCandidate]) -> np.ndarray:
        start = time.perf_counter()
        self.use_context(context)
        verify = None if self.verifier is None else (lambda idx: self._verify(candidates, idx))
        with _one_torch_thread():
            scores = draft_then_verify(self._draft_scores(candidates), self.verify_fraction, verify, self.verify_max)
        self.times.predict_s += time.perf_counter() - start
        self.times.predict_calls += 1
        self.times.candidates += len(candidates)
        return scores

    def update(self, context, candidates: list[MeasureCandidate], results: list[RunnerResult]) -> None:
        start = time.perf_counter()
        self.use_context(context)
        if self.calibration is not None:  # eager: the draft stage reads it before the next verify
            drafts = self.features.draft([c.sch for c in candidates])
            valid = [(d, r) for d, r in zip(drafts, results) if d is not None]
            self.calibration.add([d.structure for d, _ in valid], [d.draft_score for d, _ in valid],
                                 [measured_seconds(r) for _, r in valid])
        if self.on_update is not None or self.in_task is not None:  # who learns from the measured programs
            self._unlearned.append(([c.sch for c in candidates], list(results), task_key(context)))
        self.times.update_s += time.perf_counter() - start
        self.times.updates += 1

    def learn(self) -> None:
        """Feed the batches measured since the verifier last scored to the online update and the
        in-task trees. Done when the verifier is next needed (and by ``save``), not in ``update``:
        after a run's last batch nothing scores, and the retrain on the most programs, the largest
        of the run, was paid for and never used.
        Batches measured with no scoring in between are learned as one round."""
        if not self._unlearned:
            return
        batches, self._unlearned = self._unlearned, []
        for schedules, results, task in batches:
            for feats, result in zip(self.features.full(schedules), results):
                if feats is not None:
                    self.measured.features.append(feats)
                    self.measured.costs.append(_mean_cost(result))
                    self.measured.tasks.append(task)
        seen = self.measured
        if not seen.features:
            return
        if self.in_task is not None:
            self.in_task.measured(seen.features, np.array(seen.costs), seen.tasks)
        if self.on_update is not None:
            online_start = time.perf_counter()
            with _one_torch_thread():
                new = self.on_update(self.verifier, seen.features, np.array(seen.costs), seen.tasks)
            if new is not None:
                self.verifier = new.eval()
            self.times.online_s += time.perf_counter() - online_start
