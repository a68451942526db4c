"""Read a feature store. The file is untrusted input: its layout is checked on open."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import h5py
import numpy as np

from .schema import DENSE_ARRAYS, RECORD_ARRAYS, STATEMENT_ARRAYS, STORE_FORMAT, StoreError, UnitFeatures


@dataclass
class StoreData:
    """Every array of a store in memory; rows are records, statement rows are ragged."""

    records: dict[str, np.ndarray]  # RECORD_ARRAYS + task_id, file_id, stmt_offset
    statements: np.ndarray  # [S, D]
    symbols: np.ndarray  # [S, 11]
    dataflow: np.ndarray  # [R, 8, 23]
    steps: np.ndarray  # [R, MAX_STEPS, STEP_DIM] TLP step vectors
    task_keys: list[str]  # "workload_key|target_kind"
    task_networks: list[dict[str, int]]  # network -> weight, per task
    file_paths: list[str]
    file_devices: list[str]

    @property
    def n_records(self) -> int:
        return len(self.records["line"])


def _decode(v):
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            return v
    return v.item() if isinstance(v, np.generic) else v


class FeatureStore:
    def __init__(self, path: Union[str, Path], expect_schema: Optional[str] = None):
        self.path = Path(path)
        try:
            with h5py.File(self.path, "r") as f:
                fmt = f.attrs.get("store_format")
                if fmt != STORE_FORMAT:
                    raise StoreError(f"{self.path}: not a pruner-offline feature store (format {fmt!r})")
                self.meta = {k: _decode(v) for k, v in f.attrs.items() if k != "store_format"}
                self._check(f)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot read HDF5 ({exc})") from None
        schema = self.meta.get("feature_schema")
        if expect_schema is not None and schema != expect_schema:
            raise StoreError(
                f"{self.path} holds features of schema {schema!r}, this code needs {expect_schema!r}: "
                "featurize the dataset again with this version (pruner-train featurize)")

    def _check(self, f: h5py.File) -> None:
        try:
            n = f["records/line"].shape[0]
            bad = [k for k in list(RECORD_ARRAYS) + ["task_id", "file_id"] if f[f"records/{k}"].shape[0] != n]
            offsets = f["records/stmt_offset"]
            if offsets.shape[0] != n + 1:
                bad.append("stmt_offset")
            s = int(offsets[-1]) if offsets.shape[0] else 0
            bad += [k for k in STATEMENT_ARRAYS if f[k].shape[0] != s]
            bad += [k for k in DENSE_ARRAYS if f[k].shape[0] != n]
        except KeyError as exc:
            raise StoreError(f"{self.path}: missing dataset ({exc})") from None
        if bad:
            raise StoreError(f"{self.path}: inconsistent arrays: {', '.join(bad)}")

    @property
    def n_records(self) -> int:
        with h5py.File(self.path, "r") as f:
            return int(f["records/line"].shape[0])

    def load(self) -> StoreData:
        with h5py.File(self.path, "r") as f:
            records = {k: f[f"records/{k}"][...] for k in f["records"]}
            return StoreData(
                records=records,
                statements=f["statements"][...],
                symbols=f["symbols"][...],
                dataflow=f["dataflow"][...],
                steps=f["steps"][...],
                task_keys=[k.decode() for k in f["tasks/key"][...]],
                task_networks=[json.loads(x) for x in f["tasks/networks"][...]],
                file_paths=[p.decode() for p in f["files/path"][...]],
                file_devices=[d.decode() for d in f["files/device"][...]],
            )

    def has_step_vectors(self) -> bool:
        """Whether any record carries Ansor steps (TenSet sources do, MetaSchedule ones do not)."""
        with h5py.File(self.path, "r") as f:
            steps = f["steps"]
            return any(steps[i:i + 4096].any() for i in range(0, steps.shape[0], 4096))

    def task_networks(self) -> dict[str, dict[str, int]]:
        with h5py.File(self.path, "r") as f:
            return {k.decode(): json.loads(v) for k, v in zip(f["tasks/key"][...], f["tasks/networks"][...])}

    def failures(self) -> list[tuple[str, int, str]]:
        """(file, line, reason) of every record whose replay or featurization failed."""
        with h5py.File(self.path, "r") as f:
            paths = [p.decode() for p in f["files/path"][...]]
            return [(paths[i], int(line), r.decode()) for i, line, r in
                    zip(f["failures/file_id"][...], f["failures/line"][...], f["failures/reason"][...])]

    def units(self) -> list[tuple[int, UnitFeatures]]:
        """The store split back into its record files (for merging shards)."""
        data = self.load()
        failures: dict[int, list[tuple[int, str]]] = {}
        with h5py.File(self.path, "r") as f:
            index = f["files/index"][...]
            read = f["files/records_read"][...]
            file_tasks = [t.decode() for t in f["files/task"][...]]
            for fid, line, reason in zip(f["failures/file_id"][...], f["failures/line"][...],
                                         f["failures/reason"][...]):
                failures.setdefault(int(fid), []).append((int(line), reason.decode()))
        rec = data.records
        offsets = rec["stmt_offset"]
        out = []
        for fid, path in enumerate(data.file_paths):
            rows = np.flatnonzero(rec["file_id"] == fid)
            lo, hi = (rows[0], rows[-1] + 1) if len(rows) else (0, 0)
            s_lo, s_hi = offsets[lo], offsets[hi]
            arrays = {k: rec[k][lo:hi] for k in RECORD_ARRAYS}
            arrays.update({k: getattr(data, k)[s_lo:s_hi] for k in STATEMENT_ARRAYS})
            arrays.update({k: getattr(data, k)[lo:hi] for k in DENSE_ARRAYS})
            key, _, kind = file_tasks[fid].rpartition("|")
            out.append((int(index[fid]), UnitFeatures(path, data.file_devices[fid], key, kind, arrays,
                                                      failures.get(fid, []), int(read[fid]))))
        return out
