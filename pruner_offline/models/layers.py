"""Building blocks shared by the models."""

from __future__ import annotations

import torch
from torch import nn


def segment_sum(rows: torch.Tensor, segment: torch.Tensor, n: int) -> torch.Tensor:
    """Sum the rows of each segment: a program is the sum of its statements."""
    out = rows.new_zeros((n, rows.shape[-1]))
    return out.index_add_(0, segment, rows)


def mlp(sizes: list[int]) -> nn.Sequential:
    """Linear→ReLU after every layer, as both published branches are built."""
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)


class Residual(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.linear(x))


class TokenAttention(nn.Module):
    """Self-attention over a short token sequence with a residual, then a masked sum over tokens.

    All-zero tokens are padding (an absent access, a step past the end); a sequence that is
    all padding sums to zeros instead of producing NaNs.
    """

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, h: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        empty = pad.all(dim=1, keepdim=True)
        mask = pad & ~empty  # attend over everything when nothing is present
        a, _ = self.attn(h, h, h, key_padding_mask=mask, need_weights=False)
        h = h + a
        return (h * (~pad).unsqueeze(-1)).sum(dim=1)


class DraftPrior(nn.Module):
    """Adds the analytic draft score (log-scaled, divided by its training maximum) to a model's
    output with a learned weight. Within a task that score spreads by only 0.04 (CPU) to 0.11
    (H200) of its maximum, so the weight starts at 16: a 0.7-1.8 logit difference that the ranking
    loss sees from the first step. Adam moves it by about the learning rate a step, so in a run of a
    few hundred steps it stays near 16 (15.98 in the bundled models): the network learns a
    correction to the prior, it does not learn to drop it. Retraining cannot overturn it quickly
    either, on a device where the analytic score ranks badly."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor(16.0))

    def forward(self, out: torch.Tensor, draft_score: torch.Tensor, correction_scale: float = 1.0) -> torch.Tensor:
        return correction_scale * out + self.weight * draft_score


class RankHead(nn.Module):
    """Linear→ReLU→BatchNorm→residual blocks→score (PaCM's published head)."""

    def __init__(self, in_dim: int, hidden: int, blocks: int = 2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.BatchNorm1d(hidden),
                                 *[Residual(hidden) for _ in range(blocks)], nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)
