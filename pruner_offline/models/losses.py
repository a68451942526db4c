"""Ranking losses. Labels are comparable across tasks (min_cost/cost), so a mini-batch is one list."""

from __future__ import annotations

import torch


def lambda_rank(pred: torch.Tensor, y: torch.Tensor, sigma: float = 1.0) -> torch.Tensor:
    """LambdaRank: pairwise logistic terms weighted by how much swapping the pair changes NDCG."""
    order = torch.argsort(pred, descending=True)
    p, t = pred[order], y[order]
    gains = torch.pow(2.0, t) - 1.0
    ideal = torch.sort(gains, descending=True).values
    discount = 1.0 / torch.log2(torch.arange(2, len(t) + 2, device=pred.device, dtype=pred.dtype))
    max_dcg = (ideal * discount).sum().clamp_min(1e-10)
    pair = (t[:, None] > t[None, :])
    delta = (gains[:, None] - gains[None, :]).abs() * (discount[:, None] - discount[None, :]).abs() / max_dcg
    logits = (sigma * (p[:, None] - p[None, :])).clamp(-50, 50)
    loss = -(torch.nn.functional.logsigmoid(logits) * delta)[pair]
    return loss.sum() / pair.sum().clamp_min(1)


def pairwise_logistic(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    pair = y[:, None] > y[None, :]
    diff = (pred[:, None] - pred[None, :])[pair]
    return torch.nn.functional.softplus(-diff).mean() if diff.numel() else pred.sum() * 0


def mse(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.mse_loss(pred, y)


LOSSES = {"lambdarank": lambda_rank, "pairwise": pairwise_logistic, "mse": mse}
