"""Trees fitted on the tuning run's own measurements, beside PaCM.

PaCM knows programs in general and is fine-tuned on the run's measurements a few epochs a batch
(more epochs overfit). Gradient-boosted trees fitted afresh after each batch on the run's measured
programs (statement rows pooled as models/gbdt.py pools them) learn the one workload, as
MetaSchedule's XGB model does. bench/intask.py replays 12 tuning runs of 256 programs into the
models in measuring order and has them rank each run's later programs: Kendall's tau, mean over
the points k = 32..192 measured, PaCM alone 0.200, XGB 0.203, the sum of PaCM's and the trees'
ranks 0.256 (trees from 32 programs on), and the best latency / that of the first pick 0.532,
0.584, 0.626. So once ``min_programs`` are measured, the verifier's order is that sum.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.stats import rankdata
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from ...features.extract import ProgramFeatures
from ...models.gbdt import pooled_features
from ...tenset.labels import FAILED_COST, labels_by_task


def _pooled(features: list[ProgramFeatures]) -> np.ndarray:
    return pooled_features(np.concatenate([f.statements for f in features]),
                           np.array([len(f.statements) for f in features]))


def task_throughput(costs: np.ndarray, tasks: Optional[list[str]] = None) -> np.ndarray:
    """The trees' label: best cost / cost within each task (a failed run 0), as MetaSchedule's XGB
    model labels its groups and online training labels its records. One model serves every task of
    a network's tuning run, whose kernels' latencies differ by orders of magnitude: against one best
    over all of them, every program of a large kernel would look alike (near 0)."""
    return labels_by_task(costs, costs < FAILED_COST, np.zeros(len(costs)) if tasks is None else np.asarray(tasks))


def informative_columns(x: np.ndarray) -> np.ndarray:
    """Indices of the columns of ``x`` a tree can split on, the first of each set of identical ones.
    Within one workload most pooled columns are constant or copies of another (170 of 522 are
    left, on average over the fits of 24 tuning runs replayed by bench/intask.py), and the
    boosting's cost grows with the columns, not with the few hundred programs: fitting on these
    alone gives the same trees (a constant column never splits; of equal gains the first column
    wins; the replayed rankings were identical) at a third of the time (2.7x and 3.2x less)."""
    varying = np.flatnonzero(x.min(0) != x.max(0))
    _, first = np.unique(x[:, varying], axis=1, return_index=True)
    return varying[np.sort(first)]


def _fit(x: np.ndarray, y: np.ndarray, seed: int) -> HistGradientBoostingRegressor:
    # Tens of programs, not pretraining's thousands: no held-out tenth for early stopping (3 of 30
    # programs stopped it at the first tree: a constant) and leaves of a few programs (scikit-learn's
    # 20 leave one split per tree at 30); MetaSchedule's XGB model also lets a leaf hold any number.
    return HistGradientBoostingRegressor(max_iter=100, learning_rate=0.1, max_leaf_nodes=15, min_samples_leaf=4,
                                         early_stopping=False, random_state=seed).fit(x, y)


class InTaskTrees:
    def __init__(self, min_programs: int = 64, seed: int = 0):
        if min_programs < 2:
            raise ValueError(f"min_programs must be at least 2, not {min_programs}")
        self.min_programs = min_programs
        self.seed = seed
        self.model = None
        self.columns: Optional[np.ndarray] = None  # the model's columns of the pooled features
        self._pending: Optional[tuple[list[ProgramFeatures], np.ndarray]] = None

    def measured(self, features: list[ProgramFeatures], costs: np.ndarray, tasks: Optional[list[str]] = None) -> None:
        """Every program measured so far (costs in seconds; failed ones large) and its task (None:
        all one task). The trees are fitted when next asked to score: after a run's last batch
        nothing is, and no fit is paid for."""
        if len(features) >= self.min_programs:
            self._pending = (list(features), task_throughput(np.asarray(costs, dtype=np.float64), tasks))

    def combined(self, features: list[ProgramFeatures], verifier_scores: np.ndarray) -> np.ndarray:
        """The verifier's scores of ``features``, or once fitted the sum of its ranks and the trees'."""
        if not len(features):
            return verifier_scores
        # one core: the search's own threads and the runner hold the others
        with threadpool_limits(1):
            if self._pending is not None:
                measured, y = self._pending
                x, self._pending = _pooled(measured), None
                self.columns = informative_columns(x)
                # with no column that varies the trees are a constant, which adds nothing to an order
                self.model = _fit(x[:, self.columns], y, self.seed) if len(self.columns) else None
            if self.model is None:
                return verifier_scores
            trees = self.model.predict(_pooled(features)[:, self.columns])
        return rankdata(verifier_scores) + rankdata(trees)


def make_in_task(min_programs: int, seed: Optional[int]) -> Optional[InTaskTrees]:
    """tune's --in-task-trees: None (PaCM alone) for 0."""
    return InTaskTrees(min_programs, seed or 0) if min_programs else None
