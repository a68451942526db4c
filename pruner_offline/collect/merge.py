"""Shards of one collection (``collect --shard i/N``) merged into one collection, checked: the
shards must have been measured with the same settings, each i/N once, no task in two of them.
Lines are copied as written, the records' workload indices moved to the merged workload file."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Sequence

from ..errors import BadInput
from ..sources.metaschedule import RECORD_FILE, WORKLOAD_FILE
from ..tuning.run.resume import repair_database
from .manifest import FORMAT, MANIFEST, check_same, read_manifest, write_manifest
from .run import FAILURES
from .settings import parse_shard


def is_collection(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def _lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines() if line.strip()] if path.is_file() else []


def merge_collections(out: Path, shards: Sequence[Path]) -> int:
    """Write the merged collection to ``out`` (a new or empty directory); the records merged."""
    if out.exists() and any(out.iterdir()):
        raise BadInput(f"{out}: exists and is not empty; merge into a new directory")
    manifests = []
    for path in shards:
        m = read_manifest(path)
        if m is None:
            raise BadInput(f"{path}: not a collection (no {MANIFEST})")
        repair_database(path)
        manifests.append(m)
    first = manifests[0]["settings"]
    seen: dict[int, Path] = {}
    count = None
    for path, m in zip(shards, manifests):
        i, n = parse_shard(m["settings"].get("shard") or "0/1")
        if count is not None and n != count:
            raise BadInput(f"{path} is shard {i}/{n}, {shards[0]} one of {count}: shards of two splittings")
        count = n
        if i in seen:
            raise BadInput(f"{path} and {seen[i]} are both shard {i}/{n}")
        seen[i] = path
        check_same(m, {**first, "shard": m["settings"].get("shard")}, path)
    missing = sorted(set(range(count)) - set(seen))
    if missing:
        warnings.warn(f"merging {len(shards)} of {count} shards: {', '.join(f'{i}/{count}' for i in missing)} "
                      "missing, so their tasks are not in the merged collection", stacklevel=2)
    out.mkdir(parents=True, exist_ok=True)
    workloads: list[bytes] = []
    records: list[bytes] = []
    owner: dict[str, Path] = {}
    for path in shards:
        offset = len(workloads)
        for line in _lines(path / WORKLOAD_FILE):
            key = json.loads(line)[0]  # the workload's structural hash
            if key in owner:
                raise BadInput(f"{path} and {owner[key]} both hold workload {key}: not shards of one collection")
            owner[key] = path
            workloads.append(line)
        for line in _lines(path / RECORD_FILE):
            index, rest = json.loads(line)
            records.append(json.dumps([index + offset, rest], separators=(",", ":")).encode())
    (out / WORKLOAD_FILE).write_bytes(b"".join(w + b"\n" for w in workloads))
    (out / RECORD_FILE).write_bytes(b"".join(r + b"\n" for r in records))
    (out / FAILURES).write_bytes(b"".join(line + b"\n" for p in shards for line in _lines(p / FAILURES)))
    runs = [{**run, "shard": m["settings"].get("shard")} for m in manifests for run in m["runs"]]
    write_manifest(out, {"format": FORMAT, "settings": {**first, "shard": None if not missing else "merged"},
                         "machine": manifests[0]["machine"], "runs": runs,
                         "merged_from": [str(p) for p in shards]})
    return len(records)
