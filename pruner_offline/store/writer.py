"""Assemble parts into one HDF5 store, and merge stores made as shards of one dataset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator, Sequence, Union

import h5py
import numpy as np

from ..atomic import atomic_write, check_replaceable
from .parts import lazy_part
from .schema import (DENSE_ARRAYS, RECORD_ARRAYS, ROW_SHAPES, STATEMENT_ARRAYS, STORE_FORMAT, LazyUnit, StoreError,
                     UnitFeatures, UnitHeader)

_STR = h5py.string_dtype()


# Chunks of whole rows, up to ~512 KB: the trainer reads runs of 4096 consecutive records, and a
# chunk that splits a row across columns (h5py's own guess for a tall array) is decompressed once
# per column; at most 8192 rows, so that such a read of a per-record column decompresses little more.
CHUNK_BYTES = 1 << 19
CHUNK_ROWS = 8192
WRITE_RECORDS = 4096  # records a write gathers: ~50 MB with the TLP step matrix
# chunks a unit leaves partly written wait in this cache for the next unit instead of being
# compressed, read back and compressed again
_CHUNK_CACHE = {"rdcc_nbytes": 16 << 20, "rdcc_nslots": 10007, "rdcc_w0": 1.0}


def chunk_shape(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    row = itemsize * int(np.prod(shape[1:], dtype=np.int64))
    return (max(1, min(shape[0], CHUNK_ROWS, CHUNK_BYTES // max(row, 1))), *shape[1:])


def _dataset(group: h5py.Group, name: str, shape: tuple[int, ...], dtype) -> h5py.Dataset:
    # Compressed: statement rows are mostly zeros and compress ~5x with lzf.
    size = int(np.prod(shape, dtype=np.int64))
    kwargs = {"compression": "lzf", "chunks": chunk_shape(shape, np.dtype(dtype).itemsize)} if size else {}
    return group.create_dataset(name, shape=shape, dtype=dtype, **kwargs)


def _loaded(units: Sequence[tuple[int, Union[UnitFeatures, LazyUnit]]], heads: list[UnitHeader],
            records: int = WRITE_RECORDS) -> Iterator[list[tuple[int, UnitFeatures]]]:
    """The units with records, loaded and checked against their headers, as (file id, unit) in
    batches of about ``records`` records: few large writes, and one batch in memory."""
    batch, size = [], 0
    for fid, ((_, lazy), head) in enumerate(zip(units, heads)):
        if not head.n_records:
            continue
        unit = lazy.load()
        got = unit.header
        if (got.n_records, got.n_statements) != (head.n_records, head.n_statements):
            raise StoreError(f"{head.file}: its features changed while the store was written")
        for name in STATEMENT_ARRAYS + DENSE_ARRAYS:
            x = unit.arrays[name]
            if len(x) and x.shape[1:] != ROW_SHAPES[name]:
                raise StoreError(f"{head.file}: '{name}' rows have shape {x.shape[1:]}, the store's are "
                                 f"{ROW_SHAPES[name]}")
        batch.append((fid, unit))
        size += head.n_records
        if size >= records:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def write_store(out: Path, units: Sequence[tuple[int, Union[UnitFeatures, LazyUnit]]], meta: dict,
                task_networks: dict[str, dict[str, int]]) -> None:
    """Write ``units`` (global file index, features), in index order, to ``out`` atomically.

    The tables come from the units' headers; the features are then loaded and written a batch of
    units (~``WRITE_RECORDS`` records) at a time, so memory holds one batch however large the store.
    ``task_networks`` maps a task's "workload_key|target_kind" to {network: weight}.
    """
    units = sorted(units, key=lambda u: u[0])
    heads = [u.header for _, u in units]
    task_keys: list[str] = []
    task_of_unit = []
    for h in heads:
        key = f"{h.workload_key}|{h.target_kind}"
        if not h.n_records:  # no records, no task row: keeps task ids dense
            task_of_unit.append(-1)
            continue
        if key not in task_keys:
            task_keys.append(key)
        task_of_unit.append(task_keys.index(key))
    n = sum(h.n_records for h in heads)
    s = sum(h.n_statements for h in heads)

    with atomic_write(out) as tmp, h5py.File(tmp, "w", **_CHUNK_CACHE) as f:
        # in one order whatever order the caller's dict has: merged shards are then a local run's
        # store byte for byte (HDF5 lays attributes out in the order they are written)
        for k, v in sorted({**meta, "store_format": STORE_FORMAT}.items()):
            f.attrs[k] = json.dumps(v) if isinstance(v, (dict, list)) else v
        rec = f.create_group("records")
        columns = {**RECORD_ARRAYS, "file_id": np.int32, "task_id": np.int32}
        targets = {f"records/{k}": _dataset(rec, k, (n,), dtype) for k, dtype in columns.items()}
        offsets = _dataset(rec, "stmt_offset", (n + 1,), np.int64)
        for name in STATEMENT_ARRAYS + DENSE_ARRAYS:
            targets[name] = _dataset(f, name, (s if name in STATEMENT_ARRAYS else n, *ROW_SHAPES[name]), np.float32)
        offsets[0] = 0
        unit_task = np.array(task_of_unit, np.int32)
        r = st = 0
        for batch in _loaded(units, heads):
            def cat(name: str) -> np.ndarray:
                return np.concatenate([u.arrays[name] for _, u in batch])

            fids = np.concatenate([np.full(len(u.arrays["line"]), fid, np.int32) for fid, u in batch])
            rows = slice(r, r + len(fids))
            for k in RECORD_ARRAYS:
                targets[f"records/{k}"][rows] = cat(k)
            targets["records/file_id"][rows] = fids
            targets["records/task_id"][rows] = unit_task[fids]
            counts = cat("stmt_count").astype(np.int64)
            offsets[rows.start + 1:rows.stop + 1] = st + np.cumsum(counts)
            statements = slice(st, st + int(counts.sum()))
            for name in STATEMENT_ARRAYS + DENSE_ARRAYS:
                span = statements if name in STATEMENT_ARRAYS else rows
                if span.stop > span.start:
                    targets[name][span] = cat(name)
            r, st = rows.stop, statements.stop
        files = f.create_group("files")
        files.create_dataset("index", data=np.array([i for i, _ in units], dtype=np.int64))
        files.create_dataset("path", data=[h.file for h in heads], dtype=_STR)
        files.create_dataset("device", data=[h.device for h in heads], dtype=_STR)
        files.create_dataset("task", data=[f"{h.workload_key}|{h.target_kind}" for h in heads], dtype=_STR)
        files.create_dataset("records_read", data=np.array([h.records_read for h in heads], dtype=np.int64))
        tasks = f.create_group("tasks")
        tasks.create_dataset("key", data=task_keys, dtype=_STR)
        tasks.create_dataset("networks", data=[json.dumps(task_networks.get(k, {}), sort_keys=True)
                                               for k in task_keys], dtype=_STR)
        fails = [(fid, line, reason) for fid, h in enumerate(heads) for line, reason in h.failures]
        fg = f.create_group("failures")
        fg.create_dataset("file_id", data=np.array([x[0] for x in fails], dtype=np.int32))
        fg.create_dataset("line", data=np.array([x[1] for x in fails], dtype=np.int32))
        fg.create_dataset("reason", data=[x[2] for x in fails], dtype=_STR)


def check_output(out: Path) -> None:
    """Refuse a store path that cannot be written before the work that fills it starts."""
    if out.is_dir():
        raise StoreError(f"{out}: is a directory; name the store file to write, e.g. {out / 'features.h5'}")
    try:
        check_replaceable(out)
    except OSError as exc:
        raise StoreError(f"{out}: {exc.strerror}") from None


def assemble(out: Path, parts: Iterable[tuple[int, Path]], meta: dict,
             task_networks: dict[str, dict[str, int]]) -> None:
    write_store(out, [(i, lazy_part(p)) for i, p in parts], meta, task_networks)
