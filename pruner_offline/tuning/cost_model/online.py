"""Online training inside a tuning run: one of adapt/methods.py, fed the programs measured so far."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ...adapt.methods import AdaptConfig, Method, make_method
from ...adapt.online import OnlineProgram, OnlineRecords
from ...features.extract import ProgramFeatures
from ...tenset.labels import FAILED_COST
from ...training.module import CostModelModule


@dataclass
class AdaptUpdate:
    """An OnlineUpdate: after each measured batch (one round), the adaptation method sees every
    program measured so far, labelled y = best cost / cost within its task (failed runs 0) as TenSet
    labels a task; without ``tasks``, all are one task.
    ``finetune`` keeps training its copy of the verifier; ``moa`` starts each retrain from the
    momentum copy. The verifier a caller holds is never changed; the first call fixes the weights
    the method starts from."""

    method: str = "finetune"
    epochs: int = 5
    retrain_every: int = 1  # MetaSchedule already measures a batch per round
    momentum: float = 0.99
    seed: int = 0
    min_programs: int = 8  # a ranking loss over fewer programs mostly fits noise
    _adapter: Optional[Method] = field(default=None, repr=False)
    _rounds: int = 0

    def __call__(self, verifier: Optional[CostModelModule], features: list[ProgramFeatures],
                 costs: np.ndarray, tasks: Optional[list[str]] = None) -> Optional[CostModelModule]:
        if verifier is None:
            return None
        if self._adapter is None:
            cfg = AdaptConfig(momentum=self.momentum, retrain_every=self.retrain_every, epochs=self.epochs,
                              seed=self.seed)
            self._adapter = make_method(self.method, verifier, cfg)
        self._rounds += 1
        if len(features) < self.min_programs:
            return None
        tasks = tasks if tasks is not None else ["tune"] * len(features)
        online = OnlineRecords([OnlineProgram.of_features(f, float(c), bool(c < FAILED_COST), t)
                                for f, c, t in zip(features, costs, tasks)])
        return self._adapter.predictor if self._adapter.after_round(online, self._rounds) else None
