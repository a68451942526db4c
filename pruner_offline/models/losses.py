"""Ranking losses. Each takes (pred, y, task=None): with ``task``, only records of one task are
compared, since a label (min_cost/cost within its task) says nothing about programs of other tasks;
without it a mini-batch is one list (what the published recipes do)."""

from __future__ import annotations

from typing import Optional

import torch


def _rank_in_group(order: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """For records visited in ``order``, the 0-based position of each among the records of its group."""
    g = group[order]
    same = g[:, None] == g[None, :]
    pos = same.tril(-1).sum(dim=1)
    out = torch.empty_like(pos)
    out[order] = pos
    return out


def lambda_rank(pred: torch.Tensor, y: torch.Tensor, task: Optional[torch.Tensor] = None,
                sigma: float = 1.0) -> torch.Tensor:
    """LambdaRank: pairwise logistic terms weighted by how much swapping the pair changes NDCG
    (of the pair's task when ``task`` is given)."""
    group = torch.zeros_like(y, dtype=torch.long) if task is None else task
    gains = torch.pow(2.0, y) - 1.0
    rank = _rank_in_group(torch.argsort(pred, descending=True), group).to(pred.dtype)
    ideal_rank = _rank_in_group(torch.argsort(gains, descending=True), group).to(pred.dtype)
    discount = 1.0 / torch.log2(rank + 2.0)
    _, g = torch.unique(group, return_inverse=True)
    max_dcg = torch.zeros(int(g.max()) + 1 if len(g) else 0, dtype=pred.dtype, device=pred.device)
    max_dcg = max_dcg.index_add(0, g, gains / torch.log2(ideal_rank + 2.0)).clamp_min(1e-10)[g]
    pair = (y[:, None] > y[None, :]) & (group[:, None] == group[None, :])
    delta = (gains[:, None] - gains[None, :]).abs() * (discount[:, None] - discount[None, :]).abs() / max_dcg[:, None]
    logits = (sigma * (pred[:, None] - pred[None, :])).clamp(-50, 50)
    loss = -(torch.nn.functional.logsigmoid(logits) * delta)[pair]
    return loss.sum() / pair.sum().clamp_min(1)


def pairwise_logistic(pred: torch.Tensor, y: torch.Tensor, task: Optional[torch.Tensor] = None) -> torch.Tensor:
    pair = y[:, None] > y[None, :]
    if task is not None:
        pair &= task[:, None] == task[None, :]
    diff = (pred[:, None] - pred[None, :])[pair]
    return torch.nn.functional.softplus(-diff).mean() if diff.numel() else pred.sum() * 0


def mse(pred: torch.Tensor, y: torch.Tensor, task: Optional[torch.Tensor] = None) -> torch.Tensor:
    return torch.nn.functional.mse_loss(pred, y)


def _one_list(loss):
    """``loss`` over the whole mini-batch as one list, whatever the tasks."""
    def pooled(pred: torch.Tensor, y: torch.Tensor, task: Optional[torch.Tensor] = None) -> torch.Tensor:
        return loss(pred, y)
    return pooled


# Every loss is called as loss(pred, y, task); "_task" ones compare records of one task only.
LOSSES = {"lambdarank": _one_list(lambda_rank), "pairwise": _one_list(pairwise_logistic), "mse": mse,
          "lambdarank_task": lambda_rank, "pairwise_task": pairwise_logistic}
