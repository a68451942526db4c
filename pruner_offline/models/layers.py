"""Building blocks shared by the models."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
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


class BatchNormAcrossRanks(nn.BatchNorm1d):
    """BatchNorm1d whose training statistics are those of the global batch when DDP splits it over
    ranks, on any device (torch's SyncBatchNorm refuses CPU tensors). The rank losses already see
    the global batch (training/across_ranks.py); with statistics of each rank's part, a record's
    score would still depend on which rank held it. Same parameters and buffers as BatchNorm1d, so
    model files do not change; in one process or in eval mode it is BatchNorm1d."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(x)
        # summed over ranks with gradient: every record's normalisation depends on all of them
        n = dist_nn.all_reduce(x.new_tensor([float(len(x))]))
        mean = dist_nn.all_reduce(x.sum(0)) / n
        var = dist_nn.all_reduce(((x - mean) ** 2).sum(0)) / n
        with torch.no_grad():
            m = self.momentum if self.momentum is not None else 1.0 / (float(self.num_batches_tracked) + 1)
            self.running_mean.mul_(1 - m).add_(m * mean)
            self.running_var.mul_(1 - m).add_(m * var * n / (n - 1))
            self.num_batches_tracked.add_(1)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class RankHead(nn.Module):
    """Linear→ReLU→BatchNorm→residual blocks→score (PaCM's published head)."""

    def __init__(self, in_dim: int, hidden: int, blocks: int = 2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), BatchNormAcrossRanks(hidden),
                                 *[Residual(hidden) for _ in range(blocks)], nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)
