"""Assemble parts into one HDF5 store, and merge stores made as shards of one dataset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

import h5py
import numpy as np

from ..atomic import atomic_write
from .parts import read_part
from .schema import DENSE_ARRAYS, RECORD_ARRAYS, STATEMENT_ARRAYS, STORE_FORMAT, StoreError, UnitFeatures

_STR = h5py.string_dtype()


def _dataset(group: h5py.Group, name: str, data: np.ndarray) -> None:
    # Chunked and compressed: statement rows are mostly zeros and compress ~5x with lzf.
    kwargs = {"compression": "lzf", "chunks": True} if data.size else {}
    group.create_dataset(name, data=data, **kwargs)


def write_store(out: Path, units: Sequence[tuple[int, UnitFeatures]], meta: dict,
                task_networks: dict[str, dict[str, int]]) -> None:
    """Write ``units`` (global file index, features), in index order, to ``out`` atomically.

    ``task_networks`` maps a task's "workload_key|target_kind" to {network: weight}.
    """
    units = sorted(units, key=lambda u: u[0])
    task_keys: list[str] = []
    task_of_unit = []
    for _, u in units:
        key = f"{u.workload_key}|{u.target_kind}"
        if not len(u.arrays["line"]):  # no records, no task row: keeps task ids dense
            task_of_unit.append(-1)
            continue
        if key not in task_keys:
            task_keys.append(key)
        task_of_unit.append(task_keys.index(key))
    n_rows = [len(u.arrays["line"]) for _, u in units]

    def cat(name: str, dtype=None) -> np.ndarray:
        # a unit without records may carry placeholder shapes; it adds no rows either way
        parts = [u.arrays[name] for _, u in units if len(u.arrays[name])] or [u.arrays[name] for _, u in units[:1]]
        return np.concatenate(parts).astype(dtype or parts[0].dtype, copy=False) if parts else np.zeros(0, dtype)

    with atomic_write(out) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["store_format"] = STORE_FORMAT
        for k, v in meta.items():
            f.attrs[k] = json.dumps(v) if isinstance(v, (dict, list)) else v
        rec = f.create_group("records")
        for name, dtype in RECORD_ARRAYS.items():
            _dataset(rec, name, cat(name, dtype))
        _dataset(rec, "file_id", np.repeat(np.arange(len(units), dtype=np.int32), n_rows))
        _dataset(rec, "task_id", np.repeat(np.array(task_of_unit, dtype=np.int32), n_rows))
        counts = cat("stmt_count", np.int64) if units else np.zeros(0, np.int64)
        _dataset(rec, "stmt_offset", np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
        for name in STATEMENT_ARRAYS + DENSE_ARRAYS:
            _dataset(f, name, cat(name, np.float32) if units else np.zeros((0,), np.float32))
        files = f.create_group("files")
        files.create_dataset("index", data=np.array([i for i, _ in units], dtype=np.int64))
        files.create_dataset("path", data=[u.file for _, u in units], dtype=_STR)
        files.create_dataset("device", data=[u.device for _, u in units], dtype=_STR)
        files.create_dataset("task", data=[f"{u.workload_key}|{u.target_kind}" for _, u in units], dtype=_STR)
        files.create_dataset("records_read", data=np.array([u.records_read for _, u in units], dtype=np.int64))
        tasks = f.create_group("tasks")
        tasks.create_dataset("key", data=task_keys, dtype=_STR)
        tasks.create_dataset("networks", data=[json.dumps(task_networks.get(k, {}), sort_keys=True)
                                               for k in task_keys], dtype=_STR)
        fails = [(fid, line, reason) for fid, (_, u) in enumerate(units) for line, reason in u.failures]
        fg = f.create_group("failures")
        fg.create_dataset("file_id", data=np.array([x[0] for x in fails], dtype=np.int32))
        fg.create_dataset("line", data=np.array([x[1] for x in fails], dtype=np.int32))
        fg.create_dataset("reason", data=[x[2] for x in fails], dtype=_STR)


def check_output(out: Path) -> None:
    """Refuse a store path that cannot be written before the work that fills it starts."""
    if out.is_dir():
        raise StoreError(f"{out}: is a directory; name the store file to write, e.g. {out / 'features.h5'}")


def assemble(out: Path, parts: Iterable[tuple[int, Path]], meta: dict,
             task_networks: dict[str, dict[str, int]]) -> None:
    write_store(out, [(i, read_part(p)) for i, p in parts], meta, task_networks)
