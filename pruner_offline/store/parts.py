"""Parts: one ``.npz`` per featurized record file, written atomically.

Workers never share a file: each writes its own part and renames it into place, so a run
killed at any moment leaves only whole parts behind, and a restart redoes only the files
whose part is missing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .schema import DENSE_ARRAYS, RECORD_ARRAYS, STATEMENT_ARRAYS, StoreError, UnitFeatures

_ARRAYS = tuple(RECORD_ARRAYS) + STATEMENT_ARRAYS + DENSE_ARRAYS


def part_path(parts_dir: Path, index: int) -> Path:
    return parts_dir / f"{index:07d}.npz"


def write_part(parts_dir: Path, index: int, unit: UnitFeatures) -> Path:
    meta = {
        "file": unit.file, "device": unit.device, "workload_key": unit.workload_key,
        "target_kind": unit.target_kind, "failures": unit.failures, "records_read": unit.records_read,
    }
    final = part_path(parts_dir, index)
    tmp = final.with_name(final.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        np.savez(f, meta=np.array(json.dumps(meta)), **{k: unit.arrays[k] for k in _ARRAYS})
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    return final


def read_part(path: Path) -> UnitFeatures:
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            arrays = {k: z[k] for k in _ARRAYS}
    except (OSError, ValueError, KeyError) as exc:
        raise StoreError(f"{path}: unreadable part ({exc})") from None
    return UnitFeatures(meta["file"], meta["device"], meta["workload_key"], meta["target_kind"], arrays,
                        [(int(a), str(b)) for a, b in meta["failures"]], int(meta["records_read"]))


def done_indices(parts_dir: Path) -> set[int]:
    return {int(p.stem) for p in parts_dir.glob("*.npz") if p.stem.isdigit()}


def check_manifest(parts_dir: Path, manifest: dict) -> None:
    """Create the manifest, or refuse to resume parts made with other settings."""
    path = parts_dir / "manifest.json"
    if path.exists():
        old = json.loads(path.read_text())
        if old != manifest:
            diff = sorted(k for k in set(old) | set(manifest) if old.get(k) != manifest.get(k))
            raise StoreError(
                f"{parts_dir} holds an interrupted run with other settings ({', '.join(diff)}); "
                "delete it or use the same settings to resume")
        return
    parts_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(tmp, path)
