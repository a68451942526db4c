"""TenSet's labels: within a task, y = min_cost / cost, in (0, 1]; failed records get 0 or are dropped."""

from __future__ import annotations

from typing import Literal, Optional, Sequence

import numpy as np

FailedPolicy = Literal["zero", "drop"]

# the cost TenSet's records carry for a failed measurement
FAILED_COST = 1e10

# TenSet's make_dataset drops tasks with fewer measured records than this.
TENSET_MIN_RECORDS = 48


def cost_problem(costs: Sequence[float], error_no: int) -> Optional[str]:
    """Why a measured record cannot be labelled, or None. A success (error_no 0) needs positive,
    finite times: with none it would get label 0 and pass for a failure. (Programs not yet
    measured carry ``[0]`` and are not labelled; this is for measured ones.)"""
    if error_no == 0 and not (costs and all(0 < c < np.inf for c in costs)):
        return f"bad costs: error_no 0 (a success) but costs {list(costs)!r} are not positive times"
    return None


def mean_costs(costs: Sequence[Sequence[float]]) -> np.ndarray:
    """Mean of each record's repeated costs (seconds); a record without costs gets +inf."""
    return np.array([sum(c) / len(c) if len(c) else np.inf for c in costs], dtype=np.float64)


def task_labels(cost: np.ndarray, ok: np.ndarray, failed: FailedPolicy = "zero") -> np.ndarray:
    """Labels of one task's records.

    ``cost`` is each record's mean cost, ``ok`` whether it measured without error. With
    ``failed="zero"`` failed records get 0; with ``"drop"`` they get NaN so that callers
    can filter them. A task with no successful record has only 0/NaN labels.
    """
    cost = np.asarray(cost, dtype=np.float64)
    ok = np.asarray(ok, dtype=bool) & np.isfinite(cost) & (cost > 0)
    y = np.full(cost.shape, 0.0 if failed == "zero" else np.nan)
    if ok.any():
        y[ok] = cost[ok].min() / cost[ok]
    return y


def labels_by_task(cost: np.ndarray, ok: np.ndarray, task_id: np.ndarray) -> np.ndarray:
    """``task_labels`` of records of several tasks, each against its own task's best."""
    cost, ok, task_id = np.asarray(cost, dtype=np.float64), np.asarray(ok, dtype=bool), np.asarray(task_id)
    y = np.zeros(cost.shape)
    for t in np.unique(task_id):
        mine = task_id == t
        y[mine] = task_labels(cost[mine], ok[mine])
    return y
