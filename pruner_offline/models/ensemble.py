"""Several independently initialised copies of one model in one file, trained side by side.

Each member sees the same batches and is trained on its own loss, so the members differ only by
their initialisation (a deep ensemble); the score is their mean. On workloads no training record came
from, one network's ranking moves with its seed by more than any recipe change measured
(bench/generalize.py); the mean of several is steadier and ranks better.
"""

from __future__ import annotations

import torch
from torch import nn

from .batch import Batch


class Ensemble(nn.Module):
    def __init__(self, members: list[nn.Module]):
        super().__init__()
        self.members = nn.ModuleList(members)

    def member_scores(self, b: Batch) -> list[torch.Tensor]:
        return [m(b) for m in self.members]

    def forward(self, b: Batch) -> torch.Tensor:
        return torch.stack(self.member_scores(b)).mean(dim=0)
