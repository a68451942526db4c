"""A TLP-style baseline: it reads the schedule (one vector per transform step), not the program."""

from __future__ import annotations

import torch
from torch import nn

from ..tenset.step_vectors import STEP_DIM
from .batch import Batch
from .layers import Residual, TokenAttention, mlp


class TLPModel(nn.Module):
    def __init__(self, step_dim: int = STEP_DIM, hidden: int = 128, heads: int = 4):
        super().__init__()
        self.embed = mlp([step_dim, hidden, hidden])
        self.attn = TokenAttention(hidden, heads)
        self.out = nn.Sequential(Residual(hidden), Residual(hidden), nn.Linear(hidden, 1))

    def forward(self, b: Batch) -> torch.Tensor:
        pad = (b.steps == 0).all(dim=-1)
        return self.out(self.attn(self.embed(b.steps), pad)).squeeze(-1)
