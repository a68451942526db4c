"""A store's records dealt into training, validation and test rows, computed from the file's columns a
block of records at a time: memory holds the three row lists (4 bytes a record), never the
per-record columns, so that a split of tens of millions of records costs what its rows cost.

Test rows follow the split spec (``tenset.splits``). Validation takes ``val_fraction`` of the
training rows: whole tasks (``by_task``, when there are at least 3 training tasks), else exactly
``round(n * val_fraction)`` records (none when n <= 10): those with the smallest keys of a seeded
bijective hash of their row number, which a streaming pass can find without holding every key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from ..store.reader import BLOCK, FeatureStore, open_file
from ..tenset.splits import SplitError, SplitSpec, test_mask

_BUCKET_SHIFT = np.uint64(48)  # 65536 key buckets in the streaming selection


@dataclass
class SplitRows:
    train: np.ndarray  # ascending store rows
    val: np.ndarray
    test: np.ndarray
    labelled: int  # records with a label, in any of the three
    # records whose run succeeded (label > 0; failed runs are labelled 0), for training / for test:
    # where none did there is nothing to rank, and every metric would be NaN
    measured_train: int = 0
    measured_test: int = 0


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: a bijection of uint64, so keys of distinct rows never tie."""
    z = x.astype(np.uint64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def row_keys(rows: np.ndarray, seed: int) -> np.ndarray:
    return _mix(rows.astype(np.uint64) ^ _mix(np.array([seed], np.uint64))[0])


def _blocks(store: FeatureStore, names: tuple[str, ...]) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    with open_file(store.path) as f:
        n = f["records/line"].shape[0]
        for lo in range(0, n, BLOCK):
            yield lo, {k: f[f"records/{k}"][lo:lo + BLOCK] for k in names}


def split_rows(store: FeatureStore, spec: SplitSpec, seed: int, val_fraction: float, val_by_task: bool,
               n_tasks: int, task_networks: list[frozenset[str]]) -> SplitRows:
    """The split of ``store``; raises SplitError where the spec does not fit the data."""
    sizes = np.zeros(n_tasks, dtype=np.int64)  # TenSet's within-task split counts a task's records in its file
    labelled = 0
    for _, c in _blocks(store, ("task_id", "position", "label")):
        np.maximum.at(sizes, c["task_id"], c["position"].astype(np.int64) + 1)
        labelled += int(np.isfinite(c["label"]).sum())
    # the store's record ids fit 4 bytes up to 2**31 records
    dtype = np.int32 if len(sizes) and sizes.sum() < 2**31 else np.int64

    def train_and_test() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, int, int]]:
        """(training rows, their tasks, test rows, how many of each ran successfully) per block."""
        for lo, c in _blocks(store, ("task_id", "position", "label")):
            is_test = test_mask(spec, c["task_id"], c["position"], sizes, task_networks)
            known = np.isfinite(c["label"])
            ok = c["label"] > 0
            train = np.flatnonzero(~is_test & known)
            yield (train + lo).astype(dtype), c["task_id"][train], (np.flatnonzero(is_test & known) + lo).astype(dtype), \
                int((ok & ~is_test).sum()), int((ok & is_test).sum())

    test, n_train, tasks, measured_train, measured_test = [], 0, set(), 0, 0
    buckets = np.zeros(1 << 16, dtype=np.int64)
    for train, task, t, ok_train, ok_test in train_and_test():
        test.append(t)
        measured_train += ok_train
        measured_test += ok_test
        n_train += len(train)
        tasks.update(np.unique(task).tolist())
        np.add.at(buckets, (row_keys(train, seed) >> _BUCKET_SHIFT).astype(np.int64), 1)
    if val_by_task and len(tasks) >= 3:
        n_val = min(max(1, int(round(len(tasks) * val_fraction))), len(tasks) - 1)
        val_tasks = np.random.default_rng(seed).permutation(np.array(sorted(tasks)))[:n_val]

        def is_val(rows: np.ndarray, task: np.ndarray) -> np.ndarray:
            return np.isin(task, val_tasks)
    else:
        k = int(round(n_train * val_fraction)) if n_train > 10 else 0
        limit = _kth_key(train_and_test, buckets, k, seed) if k else None

        def is_val(rows: np.ndarray, task: np.ndarray) -> np.ndarray:
            return row_keys(rows, seed) <= limit if limit is not None else np.zeros(len(rows), dtype=bool)
    # the training rows fill one array of the size pass 1 counted (validation ones are taken out as
    # they come): a list of parts joined at the end would hold them twice
    train_rows, n, val_parts = np.empty(n_train, dtype), 0, []
    for train, task, *_ in train_and_test():
        v = is_val(train, task)
        val_parts.append(train[v])
        kept = train[~v]
        train_rows[n:n + len(kept)] = kept
        n += len(kept)

    def joined(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    return SplitRows(train_rows[:n], joined(val_parts), joined(test), labelled, measured_train, measured_test)


def _kth_key(blocks: Callable[[], Iterator[tuple[np.ndarray, ...]]], buckets: np.ndarray,
             k: int, seed: int) -> np.uint64:
    """The k-th smallest key (k >= 1) of the training rows: the bucket counts place it, one more
    pass sorts the few keys of its bucket."""
    b = int(np.searchsorted(np.cumsum(buckets), k))
    before = int(buckets[:b].sum())
    inside = np.concatenate([keys[(keys >> _BUCKET_SHIFT) == b] for keys in
                             (row_keys(train, seed) for train, *_ in blocks())])
    return np.sort(inside)[k - before - 1]
