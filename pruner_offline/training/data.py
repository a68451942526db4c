"""The DataModule: records of a feature store, split as TenSet does, served as ragged batches.

By default only the per-record columns are held in memory and features are read from the file
batch by batch (``ChunkStream``); ``in_memory`` loads every feature once instead: ~3 KB a record in
memory, ~13 KB with the TLP step vectors.
"""

from __future__ import annotations

from typing import Callable, Optional

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from ..models.batch import Batch, make_batch
from ..store.reader import FeatureStore, RowReader, StoreData, StoreIndex, chunks_of, statement_index, take
from ..tenset.splits import SplitError, parse_split, test_mask
from .normalize import Scales, fit_scales_streaming

def gather_batch(d: StoreData, rows: np.ndarray, labels: Optional[np.ndarray] = None) -> Batch:
    """The records ``rows`` of ``d`` as one Batch of raw features; ``labels`` replaces the stored ones."""
    rec = d.records
    rows = np.asarray(rows, dtype=np.int64)
    idx, counts = statement_index(rec["stmt_offset"], rows)
    return make_batch(d.statements[idx], d.symbols[idx], counts, d.dataflow[rows], d.steps[rows],
                      rec["draft_score"][rows], rec["label"][rows] if labels is None else labels,
                      rec["task_id"][rows])


class ChunkStream(IterableDataset):
    """Batches of ``rows`` whose features ``read`` fetches a buffer of chunks at a time.

    Shuffling permutes the chunks of consecutive store rows, then the rows inside each buffer of
    ``buffer_chunks`` chunks' rows, so the file is read in long sequential runs. Each of ``world`` ranks
    takes every world-th chunk, and all ranks cut their share to the same number of batches (DDP
    stops when one rank runs out); DataLoader workers of a rank take every n-th buffer.
    """

    def __init__(self, read: Callable[[np.ndarray], StoreData], rows: np.ndarray, batch_size: int, shuffle: bool,
                 seed: int = 0, rank: int = 0, world: int = 1, chunk_rows: int = 4096, buffer_chunks: int = 4):
        self.read, self.rows, self.batch_size, self.shuffle = read, rows, batch_size, shuffle
        self.seed, self.rank, self.world = seed, rank, world
        self.chunk_rows, self.buffer_chunks = chunk_rows, buffer_chunks
        self.epoch = 0  # advances with each pass; with workers, they must be persistent to see it

    def plan(self, epoch: int) -> list[list[np.ndarray]]:
        """This rank's buffers in epoch ``epoch``: for each, the store rows of its batches."""
        chunks = chunks_of(self.rows, self.deal_rows())
        rng = np.random.default_rng((self.seed, epoch))
        order = rng.permutation(len(chunks)) if self.shuffle else np.arange(len(chunks))
        shares = []
        for rank in range(self.world):  # every rank's share, to agree on a common length
            buffers = []
            for rows in self._buffers([chunks[c] for c in order[rank::self.world]]):
                if self.shuffle:
                    rows = rng.permutation(rows)
                # even batches, no ragged tail; one record alone would stop BatchNorm in training
                batches = np.array_split(rows, -(-len(rows) // self.batch_size))
                buffers.append([b for b in batches if len(b) > 1 or not self.shuffle])
            shares.append(buffers)
        if self.world > 1:
            keep = min(sum(map(len, s)) for s in shares)
            shares[self.rank] = _first_batches(shares[self.rank], keep)
        return shares[self.rank]

    def _buffers(self, chunks: list[np.ndarray]) -> list[np.ndarray]:
        """Consecutive ``chunks`` joined into buffers of up to ``buffer_chunks`` store chunks' rows
        (dealt chunks may be smaller than the store's)."""
        out, run, size = [], [], 0
        for c in chunks:
            run.append(c)
            size += len(c)
            if size >= self.buffer_chunks * self.chunk_rows:
                out.append(np.concatenate(run))
                run, size = [], 0
        return out + ([np.concatenate(run)] if run else [])

    def deal_rows(self) -> int:
        """Rows per dealt chunk: the store's chunks, or smaller pieces of them when there are too few
        for every rank to get a similar share (a small store may fit in one chunk; ranks cut their
        shares to the shortest, so uneven shares would waste most of the epoch)."""
        unit = self.chunk_rows
        while self.world > 1 and unit > 1 and len(chunks_of(self.rows, unit)) < 8 * self.world:
            unit //= 2
        return unit

    def __len__(self) -> int:
        return sum(map(len, self.plan(self.epoch)))

    def __iter__(self):
        buffers = self.plan(self.epoch)
        self.epoch += 1
        worker = get_worker_info()
        if worker is not None:
            buffers = buffers[worker.id::worker.num_workers]
        for batches in buffers:
            if not batches:
                continue
            rows = np.sort(np.concatenate(batches))
            data = self.read(rows)
            for b in batches:
                yield gather_batch(data, np.searchsorted(rows, b))


def _first_batches(buffers: list[list[np.ndarray]], n: int) -> list[list[np.ndarray]]:
    out = []
    for batches in buffers:
        out.append(batches[:max(n, 0)])
        n -= len(batches)
    return out


class StoreDataModule(L.LightningDataModule):
    """``with_steps``: read the TLP step vectors (only the TLP model uses them; the CLI links it to
    ``--model.model``). ``in_memory``: load the whole store instead of reading it per batch.
    ``val_by_task``: the validation records (``val_fraction``) are whole training tasks, not a
    sample of every task's records, so that early stopping and checkpoint choice reward ranking
    workloads the model has not seen; with fewer than 3 training tasks it falls back to records."""

    def __init__(self, store: str = "", split: str = "within_task", batch_size: int = 512,
                 val_fraction: float = 0.1, seed: int = 0, num_workers: int = 0,
                 feature_schema: Optional[str] = None, with_steps: bool = False, in_memory: bool = False,
                 chunk_rows: int = 4096, buffer_chunks: int = 4, val_by_task: bool = False):
        super().__init__()
        self.store, self.split, self.seed = store, split, seed
        self.batch_size, self.num_workers = batch_size, num_workers
        self.val_fraction, self.val_by_task = val_fraction, val_by_task
        self.feature_schema, self.with_steps, self.in_memory = feature_schema, with_steps, in_memory
        self.chunk_rows, self.buffer_chunks = chunk_rows, buffer_chunks
        self.data: Optional[StoreIndex] = None  # a StoreData when in_memory
        self.reader: Optional[RowReader] = None

    # -- split
    def setup(self, stage: Optional[str] = None) -> None:
        if self.data is not None:
            return
        store = FeatureStore(self.store, expect_schema=self.feature_schema)
        self.data = d = store.load(self.with_steps) if self.in_memory else store.index()
        self.reader = None if self.in_memory else RowReader(store, d, self.with_steps, self.chunk_rows)
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
        is_val = self._validation(train, task[train])
        self.val_rows, self.train_rows = train[is_val], train[~is_val]
        if not len(self.test_rows) or (not len(self.train_rows) and stage not in ("test", "predict")):
            # scoring only needs test records: the model brings its own scales
            what = "test" if not len(self.test_rows) else "training"
            note = store.failure_note()
            raise SplitError(f"{self.store}: the split {self.split!r} leaves no labelled {what} records "
                             f"(the store holds {d.n_records} records{'; ' + note if note else ''})")
        if not len(self.train_rows):
            return
        parts = ([self.read(self.train_rows)] if self.in_memory
                 else map(self.reader.read, chunks_of(self.train_rows, self.chunk_rows)))
        self.scales: Scales = fit_scales_streaming(
            (p.statements, p.symbols, p.dataflow, p.steps, p.records["draft_score"]) for p in parts)

    def _validation(self, train: np.ndarray, task: np.ndarray) -> np.ndarray:
        """Which of the training records ``train`` (of tasks ``task``) validate instead."""
        rng = np.random.default_rng(self.seed)
        tasks = np.unique(task)
        if self.val_by_task and len(tasks) >= 3:
            n_val = min(max(1, int(round(len(tasks) * self.val_fraction))), len(tasks) - 1)
            return np.isin(task, rng.permutation(tasks)[:n_val])
        n_val = int(round(len(train) * self.val_fraction)) if len(train) > 10 else 0
        out = np.zeros(len(train), dtype=bool)
        out[rng.permutation(len(train))[:n_val]] = True
        return out

    def network_weights(self) -> dict[str, dict[int, float]]:
        """network -> {task id: weight}, for TenSet's top-k score."""
        out: dict[str, dict[int, float]] = {}
        for t, nets in enumerate(self.data.task_networks):
            for net, w in nets.items():
                out.setdefault(net, {})[t] = float(w)
        return out

    # -- batches
    def _fetch(self, rows: np.ndarray) -> tuple[StoreData, np.ndarray]:
        """Data that holds the records ``rows`` (in any order), and where each of them is in it."""
        if self.in_memory:
            return self.data, np.asarray(rows)
        unique, where = np.unique(rows, return_inverse=True)
        return self.reader.read(unique), where

    def read(self, rows: np.ndarray) -> StoreData:
        """The records ``rows``, in that order, with their features."""
        return take(*self._fetch(rows))

    def gather(self, rows: np.ndarray) -> Batch:
        """The records ``rows``, in that order, as one Batch."""
        return gather_batch(*self._fetch(rows))

    def _loader(self, rows: np.ndarray, shuffle: bool) -> DataLoader:
        trainer = self.trainer if shuffle else None  # every rank scores the whole validation split
        world = trainer.world_size if trainer else 1
        # ``batch_size`` is the global batch, split over the ranks: a recipe then takes the same
        # optimizer steps on any number of processes
        batch_size = -(-self.batch_size // world)
        if not self.in_memory:
            stream = ChunkStream(self.reader.read, rows, batch_size, shuffle, self.seed,
                                 trainer.global_rank if trainer else 0, world, self.chunk_rows, self.buffer_chunks)
            return DataLoader(stream, batch_size=None, num_workers=self.num_workers,
                              persistent_workers=self.num_workers > 0)
        # a last training batch of one record would stop BatchNorm (it needs two); it is dropped
        lone = shuffle and len(rows) % batch_size == 1
        return DataLoader(rows, batch_size=batch_size, shuffle=shuffle, collate_fn=self.gather,
                          num_workers=self.num_workers, drop_last=lone,
                          generator=torch.Generator().manual_seed(self.seed) if shuffle else None)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_rows, True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_rows, False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_rows, False)
