"""Merge stores made as shards (``--shard i/N``) of one dataset into one store."""

from __future__ import annotations

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
    base = None
    for path in stores:
        store = FeatureStore(path)
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
    write_store(out, sorted(units.items()), {**base, "shard": "merged", "target_kinds": sorted(kinds)}, networks)
    return sum(u.header.n_records for u in units.values())
