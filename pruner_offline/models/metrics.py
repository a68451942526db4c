"""Ranking metrics, implemented once and used by training logs, ``evaluate`` and ``compare``.

All take per-record arrays (prediction, label y = min_cost/cost within the task, mean cost,
task id) and score each task separately before combining, as TenSet and Pruner do.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

# Pairs grow with the square of a task's size; beyond this many records per task the
# pairwise accuracy is estimated on an evenly spaced subset.
MAX_PAIRWISE_RECORDS = 2000


def _groups(task_id: np.ndarray) -> list[np.ndarray]:
    order = np.argsort(task_id, kind="stable")
    bounds = np.flatnonzero(np.diff(task_id[order])) + 1
    return np.split(order, bounds)


def _top(pred: np.ndarray, k: int) -> np.ndarray:
    # ties broken by position so that results do not depend on the sort implementation
    return np.lexsort((np.arange(len(pred)), -pred))[:k]


def peak_score(pred: np.ndarray, y: np.ndarray, task_id: np.ndarray, k: int) -> float:
    """Mean over j <= k of (best y among the top-j predictions) / (best y), weighted by test records."""
    num = den = 0.0
    for rows in _groups(task_id):
        best = y[rows].max()
        if best <= 0:
            continue
        order = _top(pred[rows], k)
        running = np.maximum.accumulate(y[rows][order])
        score = (running / best).sum() / k + (k - len(order)) * running[-1] / best / k
        num += score * len(rows)
        den += len(rows)
    return num / den if den else float("nan")


def topk_score(pred: np.ndarray, cost: np.ndarray, task_id: np.ndarray, k: int,
               network_weights: Optional[Mapping[str, Mapping[int, float]]] = None) -> float:
    """TenSet's end-to-end proxy: per network, sum_t w_t*best_t / sum_t w_t*(best latency among the
    top-k predicted); averaged over networks. Without networks all tasks form one, weight 1."""
    best: dict[int, float] = {}
    picked: dict[int, float] = {}
    for rows in _groups(task_id):
        t = int(task_id[rows[0]])
        best[t] = cost[rows].min()
        picked[t] = cost[rows][_top(pred[rows], k)].min()
    if not network_weights:
        network_weights = {"all": {t: 1.0 for t in best}}
    scores = []
    for weights in network_weights.values():
        present = [t for t in weights if t in best]
        if not present:
            continue
        num = sum(weights[t] * best[t] for t in present)
        den = sum(weights[t] * picked[t] for t in present)
        scores.append(num / den if den > 0 else float("nan"))
    return float(np.mean(scores)) if scores else float("nan")


def pairwise_accuracy(pred: np.ndarray, y: np.ndarray, task_id: np.ndarray) -> float:
    """Share of record pairs within a task, with different labels, that the predictions order right."""
    right = total = 0
    for rows in _groups(task_id):
        if len(rows) > MAX_PAIRWISE_RECORDS:
            rows = rows[np.linspace(0, len(rows) - 1, MAX_PAIRWISE_RECORDS).astype(int)]
        dy = np.sign(y[rows][:, None] - y[rows][None, :])
        dp = np.sign(pred[rows][:, None] - pred[rows][None, :])
        mask = np.triu(dy != 0, 1)
        right += int((dy[mask] == dp[mask]).sum())
        total += int(mask.sum())
    return right / total if total else float("nan")


def ndcg(pred: np.ndarray, y: np.ndarray, task_id: np.ndarray, k: int) -> float:
    """NDCG@k with the label as gain, averaged over tasks weighted by test records."""
    num = den = 0.0
    for rows in _groups(task_id):
        gains = y[rows]
        ideal = np.sort(gains)[::-1][:k]
        discount = 1.0 / np.log2(np.arange(2, k + 2))
        idcg = (ideal * discount[: len(ideal)]).sum()
        if idcg <= 0:
            continue
        got = gains[_top(pred[rows], k)]
        num += (got * discount[: len(got)]).sum() / idcg * len(rows)
        den += len(rows)
    return num / den if den else float("nan")


def ranking_report(pred: np.ndarray, y: np.ndarray, cost: np.ndarray, task_id: np.ndarray,
                   network_weights: Optional[Mapping[str, Mapping[int, float]]] = None,
                   ks: Sequence[int] = (1, 5)) -> dict[str, float]:
    """Every metric the toolkit reports, under the names ``evaluate --json`` prints."""
    pred = np.asarray(pred, dtype=np.float64)
    y = np.nan_to_num(np.asarray(y, dtype=np.float64), nan=0.0)
    task_id = np.asarray(task_id)
    out: dict[str, float] = {}
    for k in ks:
        out[f"peak@{k}"] = peak_score(pred, y, task_id, k)
        out[f"topk@{k}"] = topk_score(pred, np.asarray(cost, dtype=np.float64), task_id, k, network_weights)
    out["pairwise_acc"] = pairwise_accuracy(pred, y, task_id)
    out["ndcg@10"] = ndcg(pred, y, task_id, 10)
    return out
