"""Train/test splits over records grouped by task, as TenSet evaluates cost models.

- ``within_task``: the first fraction (10%) of every task's records is test, the rest train.
- ``by_task``: a seeded random fraction of whole tasks is test.
- ``fold``: whole tasks in K seeded folds, fold I is test: over I = 0..K-1 every task is
  tested once by a model that never saw it (cross-validation over workloads).
- ``holdout``: every task that occurs in one of the named networks is test (TenSet's
  ``all_five`` names its evaluation networks), all others train.
- ``all``: every record is test: scoring a model on data it never saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import BadInput

# TenSet's evaluation networks (batch 1), held out of training as a group.
ALL_FIVE = ("resnet_18", "resnet_50", "mobilenet_v2", "resnext_50", "bert_tiny", "bert_base")


class SplitError(BadInput):
    pass


@dataclass(frozen=True)
class SplitSpec:
    kind: str = "within_task"
    test_fraction: float = 0.1
    seed: int = 0
    networks: tuple[str, ...] = ()
    fold: int = 0
    folds: int = 0

    def __str__(self) -> str:
        if self.kind == "fold":
            return f"fold:{self.fold}/{self.folds}:{self.seed}"
        if self.kind == "holdout":
            return "holdout:" + ",".join(self.networks)
        if self.kind == "by_task":
            return f"by_task:{self.test_fraction}:{self.seed}"
        if self.kind == "all":
            return "all"
        return f"within_task:{self.test_fraction}"


def parse_split(text: str) -> SplitSpec:
    """``within_task[:FRACTION]``, ``by_task[:FRACTION[:SEED]]``, ``fold:I/K[:SEED]``, ``holdout:all_five``,
    ``holdout:NET,NET`` or ``all``."""
    kind, _, rest = text.partition(":")
    parts = [p for p in rest.split(":") if p] if rest else []
    try:
        if kind == "within_task" and len(parts) <= 1:
            spec = SplitSpec(kind, float(parts[0]) if parts else 0.1)
        elif kind == "by_task" and len(parts) <= 2:
            spec = SplitSpec(kind, float(parts[0]) if parts else 0.1, int(parts[1]) if len(parts) > 1 else 0)
        elif kind == "fold" and len(parts) in (1, 2):
            i, k = parts[0].split("/")
            spec = SplitSpec(kind, seed=int(parts[1]) if len(parts) > 1 else 0, fold=int(i), folds=int(k))
            if not 0 <= spec.fold < spec.folds:
                raise ValueError
        elif kind == "all" and not parts:
            spec = SplitSpec(kind)
        elif kind == "holdout" and len(parts) == 1:
            names = [n for n in parts[0].split(",") if n]
            spec = SplitSpec(kind, networks=tuple(x for n in names for x in (ALL_FIVE if n == "all_five" else (n,))))
        else:
            raise ValueError
    except ValueError:
        raise SplitError(
            f"bad split {text!r}: use within_task[:FRACTION], by_task[:FRACTION[:SEED]], fold:I/K[:SEED] "
            "(0 <= I < K), holdout:all_five, holdout:NET[,NET...] or all") from None
    if not 0.0 < spec.test_fraction < 1.0:
        raise SplitError(f"bad split {text!r}: the test fraction must lie in (0, 1)")
    if spec.kind == "holdout" and not spec.networks:
        raise SplitError(f"bad split {text!r}: name the networks to hold out")
    if spec.seed < 0:
        raise SplitError(f"bad split {text!r}: the seed must be >= 0")
    return spec


def test_mask(
    spec: SplitSpec,
    task_of_row: np.ndarray,
    position_in_task: np.ndarray,
    task_sizes: Sequence[int],
    task_networks: Sequence[frozenset[str]] = (),
) -> np.ndarray:
    """Boolean mask over rows, True for test rows.

    Rows are records; ``task_of_row`` indexes ``task_sizes`` (records per task) and
    ``task_networks`` (the networks each task occurs in); ``position_in_task`` is the
    record's position among its task's records, in file order.
    """
    task_of_row = np.asarray(task_of_row)
    sizes = np.asarray(task_sizes)
    if spec.kind == "all":
        return np.ones(len(task_of_row), dtype=bool)
    if spec.kind == "within_task":
        n_test = np.floor(sizes * spec.test_fraction).astype(np.int64)
        n_test = np.where((n_test == 0) & (sizes >= 2), 1, n_test)
        return np.asarray(position_in_task) < n_test[task_of_row]
    if spec.kind == "by_task":
        rng = np.random.default_rng(spec.seed)
        n_tasks = len(sizes)
        n_test = max(1, int(round(n_tasks * spec.test_fraction))) if n_tasks > 1 else 0
        test_tasks = np.zeros(n_tasks, dtype=bool)
        test_tasks[rng.permutation(n_tasks)[:n_test]] = True
        return test_tasks[task_of_row]
    if spec.kind == "fold":
        if spec.folds > len(sizes):
            raise SplitError(f"bad split {spec}: {spec.folds} folds of {len(sizes)} tasks")
        fold_of_task = np.empty(len(sizes), dtype=np.int64)
        fold_of_task[np.random.default_rng(spec.seed).permutation(len(sizes))] = np.arange(len(sizes)) % spec.folds
        return fold_of_task[task_of_row] == spec.fold
    if spec.kind == "holdout":
        if len(task_networks) != len(sizes):
            raise SplitError("holdout split needs the networks of every task (the dataset has no network_info?)")
        held = set(spec.networks)
        test_tasks = np.array([bool(held & nets) for nets in task_networks], dtype=bool)
        if len(test_tasks) and not test_tasks.any():
            present = sorted(set().union(*task_networks))
            raise SplitError(f"bad split {spec}: no task of this data is in {', '.join(spec.networks)} "
                             f"(its networks: {', '.join(present) or 'none'})")
        return test_tasks[task_of_row] if len(test_tasks) else np.zeros(len(task_of_row), dtype=bool)
    raise SplitError(f"unknown split kind {spec.kind!r}")
