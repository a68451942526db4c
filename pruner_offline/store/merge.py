"""Merge stores made as shards (``--shard i/N``) of one dataset into one store."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

from .reader import FeatureStore
from .schema import StoreError, UnitFeatures
from .writer import check_output, write_store

# what differs between shards of one dataset
PER_SHARD = ("shard", "target_kinds")


def merge(out: Path, stores: Sequence[Path]) -> int:
    """Merge shards into ``out``; returns the number of records. Shards must share
    features and settings, and no record file may appear in two of them."""
    if not stores:
        raise StoreError("nothing to merge")
    check_output(out)
    units: dict[int, UnitFeatures] = {}
    networks: dict[str, dict[str, int]] = {}
    kinds: set[str] = set()
    shards: list[str] = []
    base = None
    for path in stores:
        store = FeatureStore(path)
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
