"""The learned draft model: a tiny network over PSA symbols that refines the analytic score.

Small on purpose (~3k parameters): it ranks whole candidate populations, so a score must cost
microseconds. Symbols span many orders of magnitude and are fed log-scaled (by the
normalizer); the analytic draft score enters the head so the network learns a correction.
``draft_prior``: the analytic score is also added to the output with a learned weight (as in
``models.pacm``), so the model starts as the analytic score rather than learning to rediscover it.
"""

from __future__ import annotations

import torch
from torch import nn

from .batch import Batch
from .layers import DraftPrior, mlp, segment_sum


class DraftModel(nn.Module):
    def __init__(self, symbol_dim: int = 11, hidden: int = 32, draft_prior: bool = False):
        super().__init__()
        self.draft_prior = draft_prior
        if draft_prior:
            self.prior = DraftPrior()
        self.statement = mlp([symbol_dim, hidden, hidden])
        self.head = nn.Sequential(nn.Linear(hidden + 1, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, b: Batch) -> torch.Tensor:
        x = segment_sum(self.statement(b.symbols), b.segment, b.size)
        out = self.head(torch.cat([x, b.draft_score.unsqueeze(-1)], dim=-1)).squeeze(-1)
        return self.prior(out, b.draft_score) if self.draft_prior else out
