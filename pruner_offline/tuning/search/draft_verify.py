"""Draft-then-verify where the published Pruner puts it: inside the search, not behind predict().

MetaSchedule's evolutionary search asks its cost model to score every generation of the
population. Here that cost model is the draft stage alone (DraftStage: draft model or analytic
score, as ranks), so the draft drives the generations and keeps the best unmeasured programs; PaCM
then scores only those survivors, once per measured batch, and the best of them are measured.
(DESIGN.md §6: the draft runs the generations, PaCM scores the ~512 survivors once and returns
~20.) The evolutionary search itself is MetaSchedule's, asked for a pool of candidates instead of a
batch. The draft's best of the pool, at most a share of them per loop structure (spread.py), are
PaCM's shortlist, and PaCM's best of those, at most `structure_cap` per structure, the batch, but
for `explore` candidates of the pool drawn at random from loop structures not measured yet: the
draft misjudges some structures by 2-5x (on CPUs, before feature schema 2 charged their bounds
tests, depthwise programs with the padding inlined into the convolution, which it ranked high), and
once one is measured, cost_model/calibration.py re-ranks all its programs. From `verify_pool_after`
measured programs on (0: never), PaCM and the in-task trees, which by then learn from the run's own
measurements, order the whole pool: the draft does not model some choices (unroll steps), so its
shortlist of a pool holds them at random.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel
from tvm.s_tir.meta_schedule.search_strategy import EvolutionarySearch, MeasureCandidate, PySearchStrategy

from ..cost_model.pruner import PrunerCostModel
from .spread import capped_order

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
    """MetaSchedule's evolutionary search scored by `model`'s draft stage, returning a pool of
    programs per batch, of which the draft picks `survivors` and `model`'s verifier the batch to
    measure, at most `structure_cap` of one loop structure while others remain (0: no cap, and
    the pool is the survivors), and `explore` of them from structures not measured yet."""

    POOL_PER_SURVIVOR = 4  # the search's best by draft score, to spread over structures

    def __init__(self, model: PrunerCostModel, *, population_size: int = 512, survivors: int = 32,
                 structure_cap: int = 4, explore: int = 2, verify_pool_after: int = 0,
                 inner: Optional[EvolutionarySearch] = None):
        super().__init__()
        if model.verifier is None:
            raise ValueError("draft-then-verify search needs a verifier (PaCM) in the cost model")
        self.model = model
        self.population_size = population_size
        self.survivors = survivors
        self.structure_cap = structure_cap
        self.explore = explore
        self.verify_pool_after = verify_pool_after
        self.measured: set[int] = set()  # loop structures of the programs measured
        self.rng = np.random.default_rng()
        self.inner = inner or EvolutionarySearch(population_size=population_size)
        self.max_trials = 0
        self.batch = 0
        self.trials = 0

    def _initialize_with_tune_context(self, context) -> None:
        self.inner._initialize_with_tune_context(context)
        self.model.use_context(context)
        self.rng = np.random.default_rng(int(context.rand_state) & 0xFFFFFFFF)

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces, database=None,
                   cost_model=None) -> None:
        self.max_trials, self.batch, self.trials = max_trials, num_trials_per_iter, 0
        self.measured = set()
        pool = self.survivors * (self.POOL_PER_SURVIVOR if self.structure_cap else 1)
        self.inner.pre_tuning(_UNBOUNDED_TRIALS, max(pool, num_trials_per_iter), design_spaces, database,
                              DraftStage(self.model))

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def generate_measure_candidates(self) -> Optional[list[MeasureCandidate]]:
        if self.trials >= self.max_trials:
            return None
        pool = self.inner.generate_measure_candidates()
        if pool is None:
            return None
        pool = list(pool)
        with self.model.times.search_call():
            groups = self.model.structures(pool)
            by_draft = np.argsort(-self.model.draft_ranks(pool), kind="stable")
            share = -(-self.structure_cap * self.survivors // max(self.batch, 1))  # the cap, per batch's worth
            shortlist = capped_order(by_draft, groups, share)
            if not self.verify_pool_after or self.trials < self.verify_pool_after:
                shortlist = shortlist[:self.survivors]
            verified = shortlist[self.model.verified_order([pool[i] for i in shortlist])]
        n = min(self.batch, self.max_trials - self.trials)
        picked = list(capped_order(verified, groups, self.structure_cap)[:n])
        fresh, seen, want = [], self.measured | {int(groups[i]) for i in picked}, min(self.explore, n - 1)
        for i in self.rng.permutation(len(pool)) if self.explore else ():
            if len(fresh) == want:
                break
            if int(groups[i]) not in seen:
                fresh.append(int(i))
                seen.add(int(groups[i]))
        return [pool[i] for i in picked[:n - len(fresh)] + fresh]

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.trials += len(results)
        self.measured.update(int(g) for g in self.model.structures(list(measure_candidates)))
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self) -> "DraftThenVerifySearch":
        return DraftThenVerifySearch(self.model, population_size=self.population_size, survivors=self.survivors,
                                     structure_cap=self.structure_cap, explore=self.explore,
                                     verify_pool_after=self.verify_pool_after, inner=self.inner.clone())
