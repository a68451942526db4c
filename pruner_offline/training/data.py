"""The DataModule: records of a feature store, split as TenSet does, served as ragged batches."""

from __future__ import annotations

from typing import Optional

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from ..models.batch import Batch, make_batch
from ..store.reader import FeatureStore, StoreData
from ..tenset.splits import SplitError, parse_split, test_mask
from .normalize import Scales, fit_scales


def statement_index(offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the statement rows of ``rows`` (in order), and each record's count."""
    starts, counts = offsets[rows], offsets[rows + 1] - offsets[rows]
    first = np.cumsum(counts) - counts
    return np.repeat(starts - first, counts) + np.arange(int(counts.sum())), counts


def gather_batch(d: StoreData, rows: np.ndarray, labels: Optional[np.ndarray] = None) -> Batch:
    """The records ``rows`` of ``d`` as one Batch of raw features; ``labels`` replaces the stored ones."""
    rec = d.records
    rows = np.asarray(rows, dtype=np.int64)
    idx, counts = statement_index(rec["stmt_offset"], rows)
    return make_batch(d.statements[idx], d.symbols[idx], counts, d.dataflow[rows], d.steps[rows],
                      rec["draft_score"][rows], rec["label"][rows] if labels is None else labels,
                      rec["task_id"][rows])


class StoreDataModule(L.LightningDataModule):
    def __init__(self, store: str = "", split: str = "within_task", batch_size: int = 512,
                 val_fraction: float = 0.1, seed: int = 0, num_workers: int = 0,
                 feature_schema: Optional[str] = None):
        super().__init__()
        self.store = store
        self.split = split
        self.batch_size = batch_size
        self.val_fraction = val_fraction
        self.seed = seed
        self.num_workers = num_workers
        self.feature_schema = feature_schema
        self.data: Optional[StoreData] = None

    # -- split
    def setup(self, stage: Optional[str] = None) -> None:
        if self.data is not None:
            return
        store = FeatureStore(self.store, expect_schema=self.feature_schema)
        self.data = d = store.load()
        rec = d.records
        n_tasks = len(d.task_keys)
        task = rec["task_id"].astype(np.int64)
        # TenSet's within-task split counts a task's records in its file, replayed or not
        sizes = np.zeros(n_tasks, dtype=np.int64)
        np.maximum.at(sizes, task, rec["position"].astype(np.int64) + 1)
        networks = [frozenset(n) for n in d.task_networks]
        try:
            is_test = test_mask(parse_split(self.split), task, rec["position"], sizes, networks)
        except SplitError as exc:
            raise SplitError(f"{self.store}: {exc}") from None
        labelled = np.isfinite(rec["label"])
        self.test_rows = np.flatnonzero(is_test & labelled)
        train = np.flatnonzero(~is_test & labelled)
        rng = np.random.default_rng(self.seed)
        perm = rng.permutation(train)
        n_val = int(round(len(perm) * self.val_fraction)) if len(perm) > 10 else 0
        self.val_rows = np.sort(perm[:n_val])
        self.train_rows = np.sort(perm[n_val:])
        if not len(self.test_rows) or (not len(self.train_rows) and stage not in ("test", "predict")):
            # scoring only needs test records: the model brings its own scales
            what = "test" if not len(self.test_rows) else "training"
            note = store.failure_note()
            raise SplitError(f"{self.store}: the split {self.split!r} leaves no labelled {what} records "
                             f"(the store holds {d.n_records} records{'; ' + note if note else ''})")
        if not len(self.train_rows):
            return
        stmt_rows, _ = statement_index(rec["stmt_offset"], self.train_rows)
        self.scales: Scales = fit_scales(d.statements[stmt_rows], d.symbols[stmt_rows], d.dataflow[self.train_rows],
                                         d.steps[self.train_rows], rec["draft_score"][self.train_rows])

    def network_weights(self) -> dict[str, dict[int, float]]:
        """network -> {task id: weight}, for TenSet's top-k score."""
        out: dict[str, dict[int, float]] = {}
        for t, nets in enumerate(self.data.task_networks):
            for net, w in nets.items():
                out.setdefault(net, {})[t] = float(w)
        return out

    # -- batches
    def gather(self, rows: np.ndarray) -> Batch:
        return gather_batch(self.data, rows)

    def _loader(self, rows: np.ndarray, shuffle: bool) -> DataLoader:
        # a last training batch of one record would stop BatchNorm (it needs two); it is dropped
        lone = shuffle and len(rows) % self.batch_size == 1
        return DataLoader(rows, batch_size=self.batch_size, shuffle=shuffle, collate_fn=self.gather,
                          num_workers=self.num_workers, drop_last=lone,
                          generator=torch.Generator().manual_seed(self.seed) if shuffle else None)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_rows, True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_rows, False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_rows, False)
