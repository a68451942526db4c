"""Merge stores made as shards (``--shard i/N``) of one dataset into one store, and combine stores
of different datasets featurized alike (e.g. TenSet records and a device's own collection) into one
training store."""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from .reader import FeatureStore
from .schema import LazyUnit, StoreError, UnitFeatures
from .writer import check_output, write_store

# what differs between shards of one dataset
PER_SHARD = ("shard", "target_kinds")
# what stores of different datasets must share to train one model: the same features, and the
# same device constants behind their draft scores
SHARED_BY_DATASETS = ("feature_schema", "devices")


def merge_stores(out: Path, paths: Sequence[Path]) -> tuple[int, str]:
    """``merge`` for shards of one dataset, ``combine`` for stores of several (their sources'
    fingerprints differ), each store opened and checked once; returns (records, "shards" or
    "datasets")."""
    if not paths:
        raise StoreError("nothing to merge")
    check_output(out)
    opened = [FeatureStore(p) for p in paths]
    if len({s.meta.get("source_fingerprint") for s in opened}) > 1:
        return _combine(out, paths, opened), "datasets"
    return _merge(out, paths, opened), "shards"


def merge(out: Path, stores: Sequence[Path]) -> int:
    """Merge shards into ``out``; returns the number of records. Shards must share
    features and settings, and no record file may appear in two of them."""
    if not stores:
        raise StoreError("nothing to merge")
    check_output(out)
    return _merge(out, stores, [FeatureStore(p) for p in stores])


def _merge(out: Path, stores: Sequence[Path], opened: Sequence[FeatureStore]) -> int:
    units: dict[int, UnitFeatures] = {}
    networks: dict[str, dict[str, int]] = {}
    kinds: set[str] = set()
    shards: list[str] = []
    base = None
    for path, store in zip(stores, opened):
        shards.append(str(store.meta.get("shard", "")))
        meta = {k: v for k, v in store.meta.items() if k not in PER_SHARD}
        if base is None:
            base = meta
        elif meta != base:
            diff = sorted(k for k in set(meta) | set(base) if meta.get(k) != base.get(k))
            raise StoreError(f"{path} was made with other settings than {stores[0]} ({', '.join(diff)})")
        for index, unit in store.units():
            if index in units:
                raise StoreError(f"{path}: record file {unit.header.file} is also in another shard")
            units[index] = unit
        networks.update(store.task_networks())
        kinds.update(store.meta.get("target_kinds", []))
    write_store(out, sorted(units.items()), {**base, "shard": _merged_shard(shards), "target_kinds": sorted(kinds)},
                networks)
    return sum(u.header.n_records for u in units.values())


def _merged_shard(shards: list[str]) -> str:
    """What the merged store says of itself: "0/1", as a local run, when the inputs are every shard
    i/N of one N (the store is then a local run's, byte for byte); else "merged", with a warning
    naming the shards missing."""
    parsed = [tuple(int(x) for x in s.split("/")) if s.count("/") == 1 and s.replace("/", "").isdigit() else None
              for s in shards]
    counts = {p[1] for p in parsed if p is not None}
    if None in parsed or len(counts) != 1:
        return "merged"  # merged stores, or shards of several splittings: nothing to check against
    n = counts.pop()
    missing = sorted(set(range(n)) - {i for i, _ in parsed})
    if not missing:
        return "0/1"
    warnings.warn(f"merging {len(shards)} of {n} shards: {', '.join(f'{i}/{n}' for i in missing)} "
                  f"{'is' if len(missing) == 1 else 'are'} missing, so their records are not in the store",
                  stacklevel=3)
    return "merged"


def combine(out: Path, stores: Sequence[Path]) -> int:
    """Write the records of stores of different datasets into ``out``, as one dataset whose record
    files are named ``<dataset>/<file>``; returns the number of records. The stores must share
    SHARED_BY_DATASETS; a task two of them hold (one workload measured by both) stays one task."""
    if len(stores) < 2:
        raise StoreError("combining needs two stores or more")
    check_output(out)
    return _combine(out, stores, [FeatureStore(p) for p in stores])


def _combine(out: Path, stores: Sequence[Path], opened: Sequence[FeatureStore]) -> int:
    first = opened[0].meta
    for path, store in zip(stores[1:], opened[1:]):
        diff = [k for k in SHARED_BY_DATASETS if store.meta.get(k) != first.get(k)]
        if diff:
            raise StoreError(f"{path} was featurized with other {' and '.join(diff)} than {stores[0]}; "
                             "featurize both with the same settings (e.g. the same --cpu) to train on them together")
    names = _dataset_names(stores, opened)
    units: list[tuple[int, LazyUnit]] = []
    networks: dict[str, dict[str, int]] = {}
    for name, store in zip(names, opened):
        for _, unit in store.units():
            header = replace(unit.header, file=f"{name}/{unit.header.file}")
            units.append((len(units), LazyUnit(header, _renamed(unit, header.file))))
        for task, nets in store.task_networks().items():
            merged = networks.setdefault(task, {})
            for net, weight in nets.items():
                merged[net] = merged.get(net, 0) + weight
    parts = [{"dataset": name, "source_fingerprint": s.meta.get("source_fingerprint"),
              "source_kind": s.meta.get("source_kind"), "settings": s.meta.get("settings"),
              "records": s.n_records} for name, s in zip(names, opened)]
    fingerprint = hashlib.sha256("|".join(str(p["source_fingerprint"]) for p in parts).encode()).hexdigest()[:16]
    meta = {**{k: first[k] for k in SHARED_BY_DATASETS if k in first}, "shard": "0/1",
            "dataset": " + ".join(names), "source_kind": "combined", "combined_from": parts,
            "source_fingerprint": fingerprint,
            "target_kinds": sorted({k for s in opened for k in s.meta.get("target_kinds", [])})}
    write_store(out, units, meta, networks)
    return sum(u.header.n_records for _, u in units)


def _dataset_names(paths: Sequence[Path], stores: Sequence[FeatureStore]) -> list[str]:
    """Each store's dataset by its directory's name (the store's own name where it records none),
    made unique, so that a combined record file says where it came from."""
    names: list[str] = []
    for path, store in zip(paths, stores):
        base = Path(str(store.meta.get("dataset") or path.stem)).name or path.stem
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def _renamed(unit: LazyUnit, file: str):
    def load() -> UnitFeatures:
        return replace(unit.load(), file=file)
    return load
