"""Parts: one ``.npz`` per featurized record file, written atomically.

Workers never share a file: each writes its own part and renames it into place, so a run
killed at any moment leaves only whole parts behind, and a restart redoes only the files
whose part is missing.
"""

from __future__ import annotations

import json
import os
import zipfile
from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np

from ..atomic import atomic_write
from .schema import (DENSE_ARRAYS, RECORD_ARRAYS, ROW_SHAPES, STATEMENT_ARRAYS, LazyUnit, StoreError, UnitFeatures,
                     UnitHeader)

_ARRAYS = tuple(RECORD_ARRAYS) + STATEMENT_ARRAYS + DENSE_ARRAYS


def part_path(parts_dir: Path, index: int) -> Path:
    return parts_dir / f"{index:07d}.npz"


def write_part(parts_dir: Path, index: int, unit: UnitFeatures) -> Path:
    meta = {
        "index": index, "file": unit.file, "device": unit.device, "workload_key": unit.workload_key,
        "target_kind": unit.target_kind, "failures": unit.failures, "records_read": unit.records_read,
    }
    final = part_path(parts_dir, index)
    with atomic_write(final) as tmp, open(tmp, "wb") as f:
        np.savez(f, meta=np.array(json.dumps(meta)), **{k: unit.arrays[k] for k in _ARRAYS})
        f.flush()
        os.fsync(f.fileno())
    return final


_REDO = "delete it and run the same command again to featurize its record file anew"


def _open_part(path: Path, arrays: Sequence[str]) -> tuple[dict, dict[str, np.ndarray]]:
    """The meta and the named arrays of a part, checked: it must be whole and be the part its name
    says (a part copied over another would otherwise put one record file into the store twice and
    lose another)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            got = {k: z[k] for k in arrays}
        failures = [(int(a), str(b)) for a, b in meta["failures"]]
        meta = {**meta, "failures": failures, "records_read": int(meta["records_read"])}
        for k in ("file", "device", "workload_key", "target_kind"):
            if not isinstance(meta[k], str):
                raise TypeError(f"{k} is not a string")
        index = meta["index"]
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as exc:
        raise StoreError(f"{path}: unreadable part ({type(exc).__name__}: {exc}); {_REDO}") from None
    if type(index) is not int or part_path(path.parent, index) != path:
        raise StoreError(f"{path}: holds part {index!r} ({meta['file']}), not {path.name}; {_REDO}")
    for k, a in got.items():
        if a.dtype.kind not in "biuf":  # the store's columns take numbers only
            raise StoreError(f"{path}: {k}: {a.dtype} values, expected numbers; {_REDO}")
    return meta, got


def _check_rows(path: Path, a: dict[str, np.ndarray]) -> None:
    """A part's arrays as the store takes them: one row per record, as many statement rows as the
    records count, rows of the features' shapes (a part without rows holds placeholders), finite
    features, labels in [0, 1] or unmeasured."""
    n = len(a["line"])
    problems = [f"{k}: {len(a[k])} rows for {n} records" for k in (*RECORD_ARRAYS, *DENSE_ARRAYS) if len(a[k]) != n]
    s = int(a["stmt_count"].sum()) if n == len(a["stmt_count"]) else -1
    problems += [f"{k}: {len(a[k])} rows for {s} statements" for k in STATEMENT_ARRAYS if len(a[k]) != s]
    problems += [f"{k}: rows of shape {a[k].shape[1:]}, expected {ROW_SHAPES[k]}"
                 for k in (*STATEMENT_ARRAYS, *DENSE_ARRAYS) if len(a[k]) and a[k].shape[1:] != ROW_SHAPES[k]]
    if not problems:
        problems += [f"{k}: values that are not finite" for k in (*STATEMENT_ARRAYS, *DENSE_ARRAYS, "draft_score")
                     if not np.isfinite(a[k]).all()]
        problems += [f"{k}: values below {low}" for k, low in (("line", 1), ("position", 0), ("stmt_count", 0))
                     if (a[k] < low).any()]
        label = a["label"]
        if not (np.isnan(label) | ((label >= 0) & (label <= 1))).all():
            problems.append("label: values outside [0, 1]")
    if problems:
        raise StoreError(f"{path}: {problems[0]}; {_REDO}")


def read_part(path: Path) -> UnitFeatures:
    meta, arrays = _open_part(path, _ARRAYS)
    _check_rows(path, arrays)
    return UnitFeatures(meta["file"], meta["device"], meta["workload_key"], meta["target_kind"], arrays,
                        meta["failures"], meta["records_read"])


def lazy_part(path: Path) -> LazyUnit:
    """A part's header, read without its feature arrays, which ``load`` reads when they are written."""
    meta, arrays = _open_part(path, ("line", "stmt_count"))
    header = UnitHeader(meta["file"], meta["device"], meta["workload_key"], meta["target_kind"], meta["failures"],
                        meta["records_read"], len(arrays["line"]), int(arrays["stmt_count"].sum()))
    return LazyUnit(header, partial(read_part, path))


def done_indices(parts_dir: Path) -> set[int]:
    return {int(p.stem) for p in parts_dir.glob("*.npz") if p.stem.isdigit()}


def check_manifest(parts_dir: Path, manifest: dict) -> None:
    """Create the manifest, or refuse to resume parts made with other settings."""
    path = parts_dir / "manifest.json"
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as exc:
            raise StoreError(f"{path}: unreadable ({exc}); delete {parts_dir} to start over") from None
        if old != manifest:
            diff = sorted(k for k in set(old) | set(manifest) if old.get(k) != manifest.get(k))
            raise StoreError(
                f"{parts_dir} holds an interrupted run with other settings ({', '.join(diff)}); "
                "delete it or use the same settings to resume")
        return
    parts_dir.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
