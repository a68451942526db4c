"""Draft-then-verify where the published Pruner puts it: inside the search, not behind predict().

MetaSchedule's evolutionary search asks its cost model to score every generation of the
population. Here that cost model is the draft stage alone (DraftStage: draft model or analytic
score, as ranks), so the draft drives the generations and keeps the best unmeasured programs; PaCM
then scores only those survivors, once per measured batch, and the best of them are measured.
(DESIGN.md §6: the draft runs the generations, PaCM scores the ~512 survivors once and returns
~20.) The evolutionary search itself is MetaSchedule's, asked for `survivors` candidates instead
of a batch; it counts them all as handed out, so a survivor PaCM passes over is not proposed again.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel
from tvm.s_tir.meta_schedule.search_strategy import EvolutionarySearch, MeasureCandidate, PySearchStrategy

from .cost_model import PrunerCostModel

# EvolutionarySearch stops on its own trial count; ours stops it, so it is given one it never reaches.
_UNBOUNDED_TRIALS = 1 << 30


@derived_object
class DraftStage(PyCostModel):
    """The draft stage of `model` as a cost model: draft ranks, no verification; measured programs
    reach `model` through the task scheduler's own update()."""

    def __init__(self, model: PrunerCostModel):
        super().__init__()
        self.model = model

    def load(self, path: str) -> None:
        raise NotImplementedError("the draft stage is loaded with its PrunerCostModel")

    def save(self, path: str) -> None:
        raise NotImplementedError("the draft stage is saved with its PrunerCostModel")

    def update(self, context, candidates, results) -> None:
        pass

    def predict(self, context, candidates: list[MeasureCandidate]) -> np.ndarray:
        with self.model.times.search_call():
            return self.model.draft_ranks(candidates)


@derived_object
class DraftThenVerifySearch(PySearchStrategy):
    """MetaSchedule's evolutionary search scored by `model`'s draft stage, returning `survivors`
    programs per batch, of which `model`'s verifier picks the batch to measure."""

    def __init__(self, model: PrunerCostModel, *, population_size: int = 512, survivors: int = 32,
                 inner: Optional[EvolutionarySearch] = None):
        super().__init__()
        if model.verifier is None:
            raise ValueError("draft-then-verify search needs a verifier (PaCM) in the cost model")
        self.model = model
        self.population_size = population_size
        self.survivors = survivors
        self.inner = inner or EvolutionarySearch(population_size=population_size)
        self.max_trials = 0
        self.batch = 0
        self.trials = 0

    def _initialize_with_tune_context(self, context) -> None:
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces, database=None,
                   cost_model=None) -> None:
        self.max_trials, self.batch, self.trials = max_trials, num_trials_per_iter, 0
        self.inner.pre_tuning(_UNBOUNDED_TRIALS, max(self.survivors, num_trials_per_iter), design_spaces, database,
                              DraftStage(self.model))

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def generate_measure_candidates(self) -> Optional[list[MeasureCandidate]]:
        if self.trials >= self.max_trials:
            return None
        candidates = self.inner.generate_measure_candidates()
        if candidates is None:
            return None
        with self.model.times.search_call():
            order = self.model.verified_order(list(candidates))
        return [candidates[i] for i in order[:min(self.batch, self.max_trials - self.trials)]]

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.trials += len(results)
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self) -> "DraftThenVerifySearch":
        return DraftThenVerifySearch(self.model, population_size=self.population_size, survivors=self.survivors,
                                     inner=self.inner.clone())
