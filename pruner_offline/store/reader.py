"""Read a feature store. The file is untrusted input: its layout is checked on open."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Iterator, Optional, Sequence, Union

import h5py
import numpy as np

from ..devices import device_from_json
from ..tenset.step_vectors import STEP_DIM
from .schema import (DENSE_ARRAYS, INDEX_DATASETS, RECORD_ARRAYS, ROW_SHAPES, STATEMENT_ARRAYS, STORE_FORMAT,
                     LazyUnit, StoreError, UnitFeatures, UnitHeader)


RECORD_COLUMNS = (*RECORD_ARRAYS, "task_id", "file_id")  # the per-record datasets but stmt_offset
BLOCK = 1 << 18  # rows a pass over whole per-record columns reads at a time
# HDF5 2.0 gives every open dataset an 8 MB chunk cache; a reader of a dozen datasets that reads a
# 10 M-record store filled them all (~100 MB, kept by the allocator after the file closed). Passes
# over a store read each chunk once; only a run of rows that ends inside a chunk reads it again
_READ_CACHE = 1 << 20


def open_file(path: Union[str, Path]) -> h5py.File:
    """A store file opened for reading, with small chunk caches (``open_rows`` sizes its own)."""
    return h5py.File(path, "r", rdcc_nbytes=_READ_CACHE, rdcc_nslots=521)


def open_rows(f: h5py.File, name: str) -> h5py.Dataset:
    """Dataset ``name`` of ``f`` opened for reading runs of rows in order: its chunk cache holds
    the chunks one row crosses, twice over, so that the chunks a run ends in are still decompressed
    when the next run starts there. The writer's chunks are whole rows (one chunk a row); a store
    chunked across columns gets a cache as wide as its rows, however large the store."""
    d = f[name]
    if d.chunks is None:
        return d
    across = int(np.prod([-(-n // c) for n, c in zip(d.shape[1:], d.chunks[1:])]))
    nbytes = max(_READ_CACHE, 2 * across * int(np.prod(d.chunks)) * d.dtype.itemsize)
    dapl = h5py.h5p.create(h5py.h5p.DATASET_ACCESS)
    dapl.set_chunk_cache(max(521, 8 * across + 1), nbytes, 1.0)
    return h5py.Dataset(h5py.h5d.open(f.id, name.encode(), dapl))


def _open_datasets(path: Path) -> tuple[h5py.File, dict[str, h5py.Dataset]]:
    """The store file and every per-record and feature dataset of it, opened for runs of rows; they
    stay open between reads, because the chunk cache is a dataset's."""
    f = open_file(path)
    datasets = {k: open_rows(f, f"records/{k}") for k in (*RECORD_COLUMNS, "stmt_offset")}
    datasets.update({k: open_rows(f, k) for k in STATEMENT_ARRAYS + DENSE_ARRAYS})
    return f, datasets


@dataclass
class StoreTables:
    """The task and file tables and the number of records: what a reader that reads records from
    the file as it needs them keeps in memory."""

    n_records: int
    task_keys: list[str]  # "workload_key|target_kind"
    task_networks: list[dict[str, int]]  # network -> weight, per task
    file_paths: list[str]
    file_devices: list[str]


@dataclass
class StoreIndex:
    """The per-record columns and the task and file tables: tens of bytes a record, no features."""

    records: dict[str, np.ndarray]  # RECORD_ARRAYS + task_id, file_id, stmt_offset
    task_keys: list[str]  # "workload_key|target_kind"
    task_networks: list[dict[str, int]]  # network -> weight, per task
    file_paths: list[str]
    file_devices: list[str]

    @property
    def n_records(self) -> int:
        return len(self.records["line"])

    @property
    def tables(self) -> StoreTables:
        return StoreTables(self.n_records, self.task_keys, self.task_networks, self.file_paths, self.file_devices)


@dataclass
class StoreData(StoreIndex):
    """Records with their features in memory; statement rows are ragged."""

    statements: np.ndarray  # [S, D]
    symbols: np.ndarray  # [S, 11]
    dataflow: np.ndarray  # [R, 8, 23]
    steps: np.ndarray  # [R, MAX_STEPS, STEP_DIM] TLP step vectors; [R, 0, STEP_DIM] where not read


def no_steps(n: int) -> np.ndarray:
    """Step vectors of ``n`` records that were not read: what every model but TLP gets."""
    return np.zeros((n, 0, STEP_DIM), np.float32)


def statement_index(offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the statement rows of ``rows`` (in order), and each record's count."""
    starts, counts = offsets[rows], offsets[rows + 1] - offsets[rows]
    first = np.cumsum(counts) - counts
    return np.repeat(starts - first, counts) + np.arange(int(counts.sum())), counts


def chunks_of(rows: np.ndarray, chunk_rows: int) -> list[np.ndarray]:
    """``rows`` (ascending) cut where they enter another chunk of ``chunk_rows`` consecutive records."""
    if not len(rows):
        return []
    # found by searching the chunks' starts, not by a pass over every row: ``rows`` may be most of a
    # 10 M-record store, and temporaries of its size would be most of training's memory
    starts = np.arange(int(rows[0]) // chunk_rows + 1, int(rows[-1]) // chunk_rows + 1, dtype=np.int64) * chunk_rows
    return [c for c in np.split(rows, np.searchsorted(rows, starts)) if len(c)]


def take_records(d: StoreIndex, rows: np.ndarray) -> StoreIndex:
    """The per-record columns of ``rows``, in that order, with statement offsets of their own."""
    offsets = d.records["stmt_offset"]
    records = {k: v[rows] for k, v in d.records.items() if k != "stmt_offset"}
    records["stmt_offset"] = np.concatenate([[0], np.cumsum(offsets[rows + 1] - offsets[rows])])
    return StoreIndex(records, d.task_keys, d.task_networks, d.file_paths, d.file_devices)


def take(d: StoreData, rows: np.ndarray) -> StoreData:
    """The records ``rows`` of ``d``, in that order, as data of their own."""
    idx, _ = statement_index(d.records["stmt_offset"], rows)
    return StoreData(**vars(take_records(d, rows)), statements=d.statements[idx], symbols=d.symbols[idx],
                     dataflow=d.dataflow[rows], steps=d.steps[rows])


def _decode(v):
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            return v
    return v.item() if isinstance(v, np.generic) else v


def _length(d: object) -> int:
    """Rows of a dataset; 0 for a scalar or a group, which the checks then refuse by shape."""
    return d.shape[0] if isinstance(d, h5py.Dataset) and d.ndim else 0


def _check_column(path: Path, name: str, d: h5py.Dataset, kind: str, rows: int) -> None:
    if not isinstance(d, h5py.Dataset) or d.ndim != 1 or d.shape[0] != rows:
        raise StoreError(f"{path}: inconsistent arrays: {name} has shape {getattr(d, 'shape', None)}, "
                         f"expected ({rows},)")
    if d.dtype.kind != kind and not (kind == "i" and d.dtype.kind == "u"):
        raise StoreError(f"{path}: {name}: {d.dtype} values, expected {'integers' if kind in 'iu' else 'numbers'}")


def _check_rows(path: Path, name: str, d: h5py.Dataset, rows: int) -> None:
    # A store without rows may hold placeholder shapes: it gives a model nothing to misread.
    shape = (rows, *ROW_SHAPES[name])
    if not isinstance(d, h5py.Dataset) or _length(d) != rows or (rows and d.shape != shape):
        raise StoreError(f"{path}: inconsistent arrays: {name} has shape {getattr(d, 'shape', None)}, expected {shape}")
    if d.dtype.kind != "f":
        raise StoreError(f"{path}: {name}: {d.dtype} values, expected numbers")


def _bad_rows(arrays: dict[str, np.ndarray]) -> Iterator[tuple[str, str, np.ndarray]]:
    """(array, problem, mask of its bad rows) for each of ``arrays`` (numbers that reach a model)."""
    for name, x in arrays.items():
        if name == "records/label":  # NaN: unmeasured
            yield name, "outside [0, 1]", ~(np.isnan(x) | ((x >= 0) & (x <= 1)))
        else:
            yield name, "not finite", ~np.isfinite(x).all(axis=tuple(range(1, x.ndim)))


class FeatureStore:
    def __init__(self, path: Union[str, Path], expect_schema: Optional[str] = None):
        self.path = Path(path)
        try:
            with open_file(self.path) as f:
                fmt = f.attrs.get("store_format")
                if fmt != STORE_FORMAT:
                    raise StoreError(f"{self.path}: not a pruner-offline feature store (format {fmt!r})")
                self.meta = {k: _decode(v) for k, v in f.attrs.items() if k != "store_format"}
                self._check_meta()
                self._check(f)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot read HDF5 ({exc})") from None
        schema = self.meta.get("feature_schema")
        if expect_schema is not None and schema != expect_schema:
            raise StoreError(
                f"{self.path} holds features of schema {schema!r}, this code needs {expect_schema!r}: "
                "featurize the dataset again with this version (pruner-train featurize)")

    def _check_meta(self) -> None:
        """The attributes other stages read: target kinds, and device constants per target kind."""
        kinds, devices = self.meta.get("target_kinds", []), self.meta.get("devices", {})
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise StoreError(f"{self.path}: attribute target_kinds: {str(kinds)[:100]!r}, expected a list of names")
        if not isinstance(devices, dict):
            raise StoreError(f"{self.path}: attribute devices: {str(devices)[:100]!r}, expected device constants "
                             "per target kind")
        for kind, d in devices.items():
            try:
                device_from_json(d)
            except ValueError as exc:
                raise StoreError(f"{self.path}: attribute devices[{kind!r}]: {exc}") from None

    def _check(self, f: h5py.File) -> None:
        """Layout and index contents: a store that passes can be indexed without a crash."""
        path = self.path
        columns = {**RECORD_ARRAYS, "task_id": np.int32, "file_id": np.int32}
        required = [f"records/{k}" for k in (*columns, "stmt_offset")] + list(STATEMENT_ARRAYS + DENSE_ARRAYS)
        required += [f"{g}/{k}" for g, names in INDEX_DATASETS.items() for k in names]
        missing = [name for name in required if name not in f]
        if missing:
            raise StoreError(f"{path}: missing datasets: {', '.join(missing)}")
        n = _length(f["records/line"])
        for k, dtype in columns.items():
            _check_column(path, f"records/{k}", f[f"records/{k}"], np.dtype(dtype).kind, n)
        offsets = f["records/stmt_offset"]
        _check_column(path, "records/stmt_offset", offsets, "i", n + 1)
        s = int(offsets[n])
        for k in STATEMENT_ARRAYS + DENSE_ARRAYS:
            _check_rows(path, k, f[k], s if k in STATEMENT_ARRAYS else n)
        groups = {g: {k: f[f"{g}/{k}"] for k in names} for g, names in INDEX_DATASETS.items()}
        counts = f["records/stmt_count"]
        for lo in range(0, n + 1, BLOCK):  # a block at a time: whole columns of a large store are GBs
            off = offsets[lo:lo + BLOCK + 1]
            steps = np.diff(off)
            if (lo == 0 and off[0] != 0) or (steps < 0).any() or (steps != counts[lo:lo + len(steps)]).any():
                raise StoreError(f"{path}: records/stmt_offset: does not start at 0 and step by stmt_count")
        for g, columns in groups.items():
            rows = _length(next(iter(columns.values())))
            for k, d in columns.items():
                if INDEX_DATASETS[g][k] == "i":
                    _check_column(path, f"{g}/{k}", d, "i", rows)
                elif d.shape != (rows,) or h5py.check_string_dtype(d.dtype) is None:
                    raise StoreError(f"{path}: {g}/{k}: {d.shape} {d.dtype}, expected ({rows},) strings")
        n_files, n_tasks = len(groups["files"]["path"]), len(groups["tasks"]["key"])
        for name, bound in (("records/file_id", n_files), ("records/task_id", n_tasks),
                            ("failures/file_id", n_files)):
            ids = f[name]
            for lo in range(0, len(ids), BLOCK):
                block = ids[lo:lo + BLOCK]
                if block.min() < 0 or block.max() >= bound:
                    raise StoreError(f"{path}: {name}: ids outside 0..{bound - 1}")
        for i, text in enumerate(f["tasks/networks"][...]):
            try:
                nets = json.loads(text)
            except (ValueError, UnicodeDecodeError):
                nets = None
            if not isinstance(nets, dict) or not all(type(w) in (int, float) for w in nets.values()):
                raise StoreError(f"{path}: tasks/networks row {i}: not a JSON object of network weights")

    @property
    def n_records(self) -> int:
        with open_file(self.path) as f:
            return int(f["records/line"].shape[0])

    def tables(self) -> StoreTables:
        with open_file(self.path) as f:
            return StoreTables(
                n_records=int(f["records/line"].shape[0]),
                task_keys=[k.decode() for k in f["tasks/key"][...]],
                task_networks=[json.loads(x) for x in f["tasks/networks"][...]],
                file_paths=[p.decode() for p in f["files/path"][...]],
                file_devices=[d.decode() for d in f["files/device"][...]],
            )

    def index(self) -> StoreIndex:
        """The per-record columns and tables, without features; labels and draft scores checked."""
        tables = self.tables()
        with open_file(self.path) as f:
            records = {k: f[f"records/{k}"][...] for k in f["records"]}
        index = StoreIndex(records, tables.task_keys, tables.task_networks, tables.file_paths, tables.file_devices)
        self.check_numbers({f"records/{k}": records[k] for k in ("label", "draft_score")})
        return index

    def load(self, with_steps: bool = True) -> StoreData:
        """Every record with its features, checked (here, not on open: it reads them all); the TLP
        step vectors, by far the largest array, only ``with_steps``."""
        index = self.index()
        with open_file(self.path) as f:
            features = {k: f[k][...] for k in STATEMENT_ARRAYS + DENSE_ARRAYS if with_steps or k != "steps"}
        self.check_numbers(features)
        features.setdefault("steps", no_steps(index.n_records))
        return StoreData(**vars(index), **features)

    def check_numbers(self, arrays: dict[str, np.ndarray], first_row: int = 0, first_statement: int = 0) -> None:
        """Refuse ``arrays``, read from the store starting at record ``first_row`` (statement arrays:
        at statement row ``first_statement``), if a model would misread a number of them."""
        for name, problem, bad in _bad_rows(arrays):
            if bad.any():
                row = int(np.flatnonzero(bad)[0]) + (first_statement if name in STATEMENT_ARRAYS else first_row)
                raise StoreError(f"{self.path}: {name} row {row} ({self._origin(name, row)}) is {problem} "
                                 f"({int(bad.sum())} of the rows read): featurize the dataset again")

    def _origin(self, name: str, row: int) -> str:
        """file:line of the record that row ``row`` of array ``name`` belongs to."""
        with open_file(self.path) as f:
            record = (int(np.searchsorted(f["records/stmt_offset"][...], row, side="right") - 1)
                      if name in STATEMENT_ARRAYS else row)
            path = f["files/path"][int(f["records/file_id"][record])].decode()
            return f"{path}:{int(f['records/line'][record])}"

    def has_step_vectors(self) -> bool:
        """Whether any record carries Ansor steps (TenSet sources do, MetaSchedule ones do not)."""
        with open_file(self.path) as f:
            steps = f["steps"]
            return any(steps[i:i + 4096].any() for i in range(0, steps.shape[0], 4096))

    def task_networks(self) -> dict[str, dict[str, int]]:
        with open_file(self.path) as f:
            return {k.decode(): json.loads(v) for k, v in zip(f["tasks/key"][...], f["tasks/networks"][...])}

    def failures(self) -> list[tuple[str, int, str]]:
        """(file, line, reason) of every record whose replay or featurization failed."""
        with open_file(self.path) as f:
            paths = [p.decode() for p in f["files/path"][...]]
            return [(paths[i], int(line), r.decode()) for i, line, r in
                    zip(f["failures/file_id"][...], f["failures/line"][...], f["failures/reason"][...])]

    def failure_note(self) -> str:
        """Where featurizing failed, for messages about missing records: "" when it never did."""
        failures = self.failures()
        if not failures:
            return ""
        path, line, reason = failures[0]
        return f"featurizing failed on {len(failures)} records, e.g. {path}:{line}: {reason}"

    def units(self) -> list[tuple[int, LazyUnit]]:
        """The store split back into its record files (for merging shards), each read when loaded;
        the headers come from a pass over the file and record ids, a block at a time."""
        tables = self.tables()
        n_files = len(tables.file_paths)
        failures: dict[int, list[tuple[int, str]]] = {}
        records = np.zeros(n_files, np.int64)
        statements = np.zeros(n_files, np.int64)
        with open_file(self.path) as f:
            file_index = f["files/index"][...]
            read = f["files/records_read"][...]
            file_tasks = [t.decode() for t in f["files/task"][...]]
            for fid, line, reason in zip(f["failures/file_id"][...], f["failures/line"][...],
                                         f["failures/reason"][...]):
                failures.setdefault(int(fid), []).append((int(line), reason.decode()))
            last = 0
            for lo in range(0, tables.n_records, BLOCK):
                fid = f["records/file_id"][lo:lo + BLOCK]
                if fid[0] < last or (np.diff(fid) < 0).any():
                    raise StoreError(f"{self.path}: records are not in file order, so it cannot be split "
                                     "into its files")
                last = int(fid[-1])
                records += np.bincount(fid, minlength=n_files)
                statements += np.bincount(fid, f["records/stmt_count"][lo:lo + BLOCK], n_files).astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(records)])
        reader = _UnitReader(self)
        out = []
        for fid, path in enumerate(tables.file_paths):
            key, _, kind = file_tasks[fid].rpartition("|")
            header = UnitHeader(path, tables.file_devices[fid], key, kind, failures.get(fid, []), int(read[fid]),
                                int(records[fid]), int(statements[fid]))
            out.append((int(file_index[fid]), LazyUnit(header, partial(reader.read, header, int(starts[fid])))))
        return out


def _read_run(store: "FeatureStore", datasets: dict[str, h5py.Dataset], lo: int, hi: int,
              columns: Sequence[str], names: Sequence[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Records ``lo``..``hi`` of the store: their statement offsets, and their per-record ``columns``
    and feature arrays ``names`` (statement arrays: the records' statement rows), checked as read."""
    offsets = datasets["stmt_offset"][lo:hi + 1]
    run = {k: datasets[k][offsets[0]:offsets[-1]] if k in STATEMENT_ARRAYS else datasets[k][lo:hi]
           for k in (*columns, *names)}
    store.check_numbers({(k if k in names else f"records/{k}"): x for k, x in run.items()
                         if k in names or k in ("label", "draft_score")}, lo, int(offsets[0]))
    return offsets, run


class _UnitReader:
    """Reads a store's units in turn through one open handle, whose chunk cache decompresses the
    chunks neighbouring units share once."""

    def __init__(self, store: FeatureStore):
        self.store, self._file = store, None
        self._datasets: dict[str, h5py.Dataset] = {}

    def read(self, header: UnitHeader, lo: int) -> UnitFeatures:
        """The unit ``header`` describes, whose records start at store row ``lo``."""
        if self._file is None:
            self._file, self._datasets = _open_datasets(self.store.path)
        _, arrays = _read_run(self.store, self._datasets, lo, lo + header.n_records, tuple(RECORD_ARRAYS),
                              STATEMENT_ARRAYS + DENSE_ARRAYS)
        return UnitFeatures(header.file, header.device, header.workload_key, header.target_kind, arrays,
                            header.failures, header.records_read)


class RowReader:
    """Records read from the file a chunk of consecutive records at a time, with their features
    or only their columns, so that memory holds a few chunks however large the store. Each process
    (DataLoader workers, spawned or forked) opens a file handle of its own on first read: HDF5
    handles do not survive a fork, and do not pickle."""

    def __init__(self, store: FeatureStore, tables: StoreTables, with_steps: bool, chunk_rows: int = 4096):
        self.store, self.tables, self.chunk_rows = store, tables, chunk_rows
        self.names = STATEMENT_ARRAYS + DENSE_ARRAYS if with_steps else STATEMENT_ARRAYS + ("dataflow",)
        self._file: Optional[h5py.File] = None
        self._datasets: dict[str, h5py.Dataset] = {}
        self._pid = 0

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_file": None, "_datasets": {}}

    def read(self, rows: np.ndarray) -> StoreData:
        """The records ``rows`` (ascending) with their features, each chunk checked as it is read."""
        records, features = self._read(rows, self.names)
        features.setdefault("steps", no_steps(len(rows)))
        t = self.tables
        return StoreData(records, t.task_keys, t.task_networks, t.file_paths, t.file_devices, **features)

    def columns(self, rows: np.ndarray) -> StoreIndex:
        """The per-record columns of the records ``rows`` (ascending), without features."""
        records, _ = self._read(rows, ())
        t = self.tables
        return StoreIndex(records, t.task_keys, t.task_networks, t.file_paths, t.file_devices)

    def _read(self, rows: np.ndarray, names: tuple[str, ...]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        if self._file is None or self._pid != os.getpid():
            (self._file, self._datasets), self._pid = _open_datasets(self.store.path), os.getpid()
        parts: dict[str, list[np.ndarray]] = {k: [] for k in (*RECORD_COLUMNS, *names)}
        for chunk in chunks_of(rows, self.chunk_rows):
            lo = chunk[0] // self.chunk_rows * self.chunk_rows
            hi = min(lo + self.chunk_rows, self.tables.n_records)
            offsets, slab = _read_run(self.store, self._datasets, lo, hi, RECORD_COLUMNS, names)
            local = chunk - lo
            idx, _ = statement_index(offsets - offsets[0], local)
            for k, x in slab.items():
                parts[k].append(x[idx] if k in STATEMENT_ARRAYS else x[local])
        f = self._datasets
        got = {k: np.concatenate(v) if v else np.zeros((0, *f[k].shape[1:]), f[k].dtype) for k, v in parts.items()}
        records = {k: got.pop(k) for k in list(got) if k not in names}
        records["stmt_offset"] = np.concatenate([[0], np.cumsum(records["stmt_count"], dtype=np.int64)])
        return records, got
