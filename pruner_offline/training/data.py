"""The DataModule: records of a feature store, split as TenSet does, served as ragged batches.

By default memory holds the split's row lists (4 bytes a record) and the task and file tables;
records and their features are read from the file batch by batch (``ChunkStream``). ``in_memory``
loads every record and feature once instead: ~3 KB a record, ~13 KB with the TLP step vectors.
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from ..errors import BadInput
from ..models.batch import Batch, make_batch
from ..store.reader import FeatureStore, RowReader, StoreData, StoreTables, chunks_of, statement_index, take
from ..tenset.splits import SplitError, parse_split
from .heap import return_large_blocks
from .normalize import Scales, fit_scales_streaming
from .split_rows import split_rows

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
    stops when one rank runs out); DataLoader workers of a rank take every n-th buffer. An epoch's
    plan is chunk numbers and batch counts; a buffer's rows are made when it is read, so the plan
    costs no memory per record.
    """

    def __init__(self, read: Callable[[np.ndarray], StoreData], rows: np.ndarray, batch_size: int, shuffle: bool,
                 seed: int = 0, rank: int = 0, world: int = 1, chunk_rows: int = 4096, buffer_chunks: int = 4,
                 row_tasks: Optional[np.ndarray] = None):
        """``row_tasks``: the task of each of ``rows``; given, a shuffled buffer is served a task
        after another (tasks in a random order, each task's records in a random order), so that
        a batch holds whole lists of few tasks instead of about one record of each."""
        self.read, self.rows, self.batch_size, self.shuffle = read, rows, batch_size, shuffle
        # (rows in order, their tasks): a buffer looks its rows' tasks up by binary search
        order = np.argsort(rows, kind="stable") if row_tasks is not None else None
        self.task_lookup = (rows[order], np.asarray(row_tasks)[order]) if order is not None else None
        self.seed, self.rank, self.world = seed, rank, world
        self.chunk_rows, self.buffer_chunks = chunk_rows, buffer_chunks
        self.epoch = 0  # advances with each pass; with workers, they must be persistent to see it

    def _plan(self, epoch: int) -> tuple[list[np.ndarray], list[list[int]], int]:
        """(the dealt chunks, this rank's buffers as chunk numbers, how many batches it serves)."""
        chunks = chunks_of(self.rows, self.deal_rows())
        order = (np.random.default_rng((self.seed, epoch)).permutation(len(chunks)) if self.shuffle
                 else np.arange(len(chunks)))
        shares = [self._buffers(chunks, order[rank::self.world]) for rank in range(self.world)]
        # every rank's share is counted, to agree on a common length
        counts = [sum(len(self._batch_sizes(sum(len(chunks[c]) for c in b))) for b in share) for share in shares]
        return chunks, shares[self.rank], min(counts)

    def _buffers(self, chunks: list[np.ndarray], ids: np.ndarray) -> list[list[int]]:
        """Consecutive chunks ``ids`` joined into buffers of up to ``buffer_chunks`` store chunks' rows
        (dealt chunks may be smaller than the store's)."""
        out, run, size = [], [], 0
        for c in ids:
            run.append(int(c))
            size += len(chunks[c])
            if size >= self.buffer_chunks * self.chunk_rows:
                out.append(run)
                run, size = [], 0
        return out + ([run] if run else [])

    def _batch_sizes(self, n: int) -> np.ndarray:
        """Even batches of a buffer of ``n`` rows, no ragged tail; one record alone would stop
        BatchNorm in training, so such a batch is not served."""
        k = -(-n // self.batch_size)
        sizes = np.full(k, n // k if k else 0) + (np.arange(k) < (n % k if k else 0))
        return sizes[sizes > 1] if self.shuffle else sizes

    def batch_rows(self, epoch: int, worker: int = 0, workers: int = 1) -> Iterator[list[np.ndarray]]:
        """This rank's batches in epoch ``epoch``, a buffer at a time (of a DataLoader worker: every
        ``workers``-th buffer)."""
        chunks, buffers, left = self._plan(epoch)
        for i, ids in enumerate(buffers):
            rows = np.concatenate([chunks[c] for c in ids])
            sizes = self._batch_sizes(len(rows))[:max(left, 0)]
            left -= len(sizes)
            if i % workers != worker or not len(sizes):
                continue
            if self.shuffle:
                rng = np.random.default_rng((self.seed, epoch, self.rank, i))
                rows = rng.permutation(rows)
                if self.task_lookup is not None:
                    ordered, tasks = self.task_lookup
                    task = tasks[np.searchsorted(ordered, rows)]
                    rows = rows[np.argsort(rng.permutation(int(task.max()) + 1)[task], kind="stable")]
            yield np.split(rows[:sizes.sum()], np.cumsum(sizes)[:-1])

    def deal_rows(self) -> int:
        """Rows per dealt chunk: the store's chunks, or smaller pieces of them when there are too few
        for every rank to get a similar share (a small store may fit in one chunk; ranks cut their
        shares to the shortest, so uneven shares would waste most of the epoch)."""
        unit = self.chunk_rows
        while self.world > 1 and unit > 1 and len(chunks_of(self.rows, unit)) < 8 * self.world:
            unit //= 2
        return unit

    def __len__(self) -> int:
        return self._plan(self.epoch)[2]

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        worker = get_worker_info()
        for batches in self.batch_rows(epoch, *((worker.id, worker.num_workers) if worker else (0, 1))):
            rows = np.sort(np.concatenate(batches))
            data = self.read(rows)
            for b in batches:
                yield gather_batch(data, np.searchsorted(rows, b))


class StoreDataModule(L.LightningDataModule):
    """``with_steps``: read the TLP step vectors (only the TLP model uses them; the CLI links it to
    ``--model.model``). ``in_memory``: load the whole store instead of reading it per batch.
    ``val_by_task``: the validation records (``val_fraction``) are whole training tasks, not a
    sample of every task's records, so that early stopping and checkpoint choice reward ranking
    workloads the model has not seen; with fewer than 3 training tasks it falls back to records."""

    def __init__(self, store: str = "", split: str = "within_task", batch_size: int = 512,
                 val_fraction: float = 0.1, seed: int = 0, num_workers: int = 0,
                 feature_schema: Optional[str] = None, with_steps: bool = False, in_memory: bool = False,
                 chunk_rows: int = 4096, buffer_chunks: int = 4, val_by_task: bool = False,
                 max_train_records: Optional[int] = None, task_batches: bool = False):
        """``max_train_records``: train on a seeded sample of that many of the split's training
        records (a learning curve: what more data buys), all where there are fewer.
        ``task_batches``: training batches of whole tasks (``ChunkStream``'s ``row_tasks``). With
        hundreds of tasks a random batch of 512 holds about one record of each, and a loss that
        compares records of one task only finds a few hundred pairs in it."""
        super().__init__()
        if max_train_records is not None and max_train_records < 1:
            raise BadInput(f"data.max_train_records must be at least 1, not {max_train_records}")
        self.max_train_records, self.task_batches = max_train_records, task_batches
        self.store, self.split, self.seed = store, split, seed
        self.batch_size, self.num_workers = batch_size, num_workers
        self.val_fraction, self.val_by_task = val_fraction, val_by_task
        self.feature_schema, self.with_steps, self.in_memory = feature_schema, with_steps, in_memory
        self.chunk_rows, self.buffer_chunks = chunk_rows, buffer_chunks
        self.tables: Optional[StoreTables] = None
        self.data: Optional[StoreData] = None  # only when in_memory
        self.reader: Optional[RowReader] = None

    # -- split
    def setup(self, stage: Optional[str] = None) -> None:
        if self.tables is not None:
            return
        store = FeatureStore(self.store, expect_schema=self.feature_schema)
        self.tables = store.tables()
        try:
            split = split_rows(store, parse_split(self.split), self.seed, self.val_fraction, self.val_by_task,
                               len(self.tables.task_keys), [frozenset(n) for n in self.tables.task_networks])
        except SplitError as exc:
            raise SplitError(f"{self.store}: {exc}") from None
        self.train_rows, self.val_rows, self.test_rows = split.train, split.val, split.test
        if self.max_train_records is not None and len(self.train_rows) > self.max_train_records:
            keep = np.random.default_rng(self.seed).choice(len(self.train_rows), self.max_train_records, replace=False)
            self.train_rows = self.train_rows[np.sort(keep)]
        self.n_labelled = split.labelled
        if not len(self.test_rows) or (not len(self.train_rows) and stage not in ("test", "predict")):
            # scoring only needs test records: the model brings its own scales
            what = "test" if not len(self.test_rows) else "training"
            note = store.failure_note()
            raise SplitError(f"{self.store}: the split {self.split!r} leaves no labelled {what} records "
                             f"(the store holds {self.tables.n_records} records{'; ' + note if note else ''})")
        unmeasured = "test" if not split.measured_test else "training" if stage == "fit" and not split.measured_train \
            else None
        if unmeasured:
            # failed runs are labelled 0: with no run that succeeded there is no order to learn or to
            # score, and every metric came out NaN (topk 1.0) as if something had been ranked
            note = store.failure_note()
            raise SplitError(f"{self.store}: none of the {unmeasured} records of the split {self.split!r} ran "
                             f"successfully (every one is a failed measurement), so there is nothing to rank"
                             f"{'; ' + note if note else ''}")
        if stage == "fit" and not len(self.val_rows):
            # early stopping and the checkpoint kept both watch the validation loss
            raise SplitError(f"{self.store}: the split {self.split!r} leaves {len(self.train_rows)} training records "
                             f"and none to validate on: training needs more than 10 labelled training records")
        if self.in_memory:
            self.data = store.load(self.with_steps)
        else:
            # the out-of-core path promises memory flat in the store's size: the reads are, glibc's
            # heap under a long run's batches is not (heap.py)
            return_large_blocks()
            self.reader = RowReader(store, self.tables, self.with_steps, self.chunk_rows)
        if not len(self.train_rows):
            return
        parts = ([self.read(self.train_rows)] if self.in_memory
                 else map(self.reader.read, chunks_of(self.train_rows, self.chunk_rows)))
        self.scales: Scales = fit_scales_streaming(
            (p.statements, p.symbols, p.dataflow, p.steps, p.records["draft_score"]) for p in parts)

    def columns(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The per-record columns (label, cost, task_id, ...) of the records ``rows``, in that order."""
        if self.in_memory:
            return {k: v[rows] for k, v in self.data.records.items() if k != "stmt_offset"}
        unique, where = np.unique(rows, return_inverse=True)
        got = self.reader.columns(unique).records
        return {k: v[where] for k, v in got.items() if k != "stmt_offset"}

    def network_weights(self) -> dict[str, dict[int, float]]:
        """network -> {task id: weight}, for TenSet's top-k score."""
        out: dict[str, dict[int, float]] = {}
        for t, nets in enumerate(self.tables.task_networks):
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
        grouped = shuffle and self.task_batches
        if not self.in_memory or grouped:
            stream = ChunkStream(self.reader.read if not self.in_memory else self.read, rows, batch_size, shuffle,
                                 self.seed, trainer.global_rank if trainer else 0, world, self.chunk_rows,
                                 self.buffer_chunks, self.columns(rows)["task_id"] if grouped else None)
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

    def rows_dataloader(self, rows: np.ndarray, batch_size: int = 4096) -> DataLoader:
        """The records ``rows`` in their order, for Trainer.predict: its scores line up with them."""
        return DataLoader(np.asarray(rows), batch_size=batch_size, shuffle=False, collate_fn=self.gather)

    def predict_dataloader(self) -> DataLoader:
        return self.rows_dataloader(self.test_rows)
