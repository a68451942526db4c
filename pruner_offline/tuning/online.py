"""Plain online retraining of the verifier on the programs measured so far in a tuning run."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ..features import ProgramFeatures
from ..training.module import CostModelModule
from .candidates import features_batch


@dataclass
class PlainRetrain:
    """An OnlineUpdate: a few full-batch epochs of the verifier's own loss on every measured program,
    labels y = best cost / cost (failed runs 0), as TenSet labels one task. Trains a copy, so the
    pretrained module a caller holds is never changed."""

    epochs: int = 5
    lr: float = 7e-4
    min_programs: int = 8  # a ranking loss over fewer programs mostly fits noise
    seed: int = 0

    def __call__(self, verifier: Optional[CostModelModule], features: list[ProgramFeatures],
                 costs: np.ndarray) -> Optional[CostModelModule]:
        ok = np.isfinite(costs)
        if verifier is None or len(features) < self.min_programs or ok.sum() < 2:
            return None
        y = np.where(ok, costs[ok].min() / np.where(ok, costs, 1.0), 0.0)
        batch = features_batch(features, y)
        module = copy.deepcopy(verifier)
        torch.manual_seed(self.seed)
        opt = torch.optim.Adam(module.parameters(), lr=self.lr, weight_decay=module.hparams.weight_decay)
        module.train()
        for _ in range(self.epochs):
            loss = module.loss_fn(module(batch), batch.y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 0.5)  # as in pretraining (DESIGN §6)
            opt.step()
        return module.eval()


@dataclass
class MoAUpdate:
    """An OnlineUpdate running momentum online adaptation (adapt/methods.py) inside a tuning run.
    Each measured batch is one round; the first call fixes the pretrained weights MoA starts from."""

    epochs: int = 5
    retrain_every: int = 1  # MetaSchedule measures a batch per round already
    momentum: float = 0.99
    seed: int = 0
    min_programs: int = 8
    _method: Optional[object] = None
    _rounds: int = 0

    def __call__(self, verifier: Optional[CostModelModule], features: list[ProgramFeatures],
                 costs: np.ndarray) -> Optional[CostModelModule]:
        from ..adapt.methods import AdaptConfig, MoA
        from ..adapt.online import OnlineProgram, OnlineRecords
        from ..tenset.step_vectors import MAX_STEPS, STEP_DIM

        if verifier is None:
            return None
        if self._method is None:
            cfg = AdaptConfig(momentum=self.momentum, retrain_every=self.retrain_every, epochs=self.epochs,
                              seed=self.seed)
            self._method = MoA(verifier, cfg)
        self._rounds += 1
        if len(features) < self.min_programs:
            return None
        no_steps = np.zeros((MAX_STEPS, STEP_DIM), np.float32)  # MetaSchedule traces are no Ansor steps
        online = OnlineRecords([OnlineProgram(f.statements, f.symbols, f.dataflow, no_steps, f.draft_score,
                                              float(c) if np.isfinite(c) else 1e10, bool(np.isfinite(c)), "tune")
                                for f, c in zip(features, costs)])
        return self._method.predictor if self._method.after_round(online, self._rounds) else None
