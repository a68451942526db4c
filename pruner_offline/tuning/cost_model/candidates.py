"""Features of MetaSchedule candidates, cached, and batched for our models.

The evolutionary search re-scores survivors every generation, so a program met again as the same
object is found by identity (~1 us). The draft inputs of new programs come from templates of their
loop structure (features/draft_templates.py: one pass over the loops per program, one numpy pass
per population). Full features (2-7 ms) are computed for the few programs the verifier sees, the
native part of a batch in one call on the tuning run's threads, and cached by structural hash
(~0.05 ms): measured candidates come back in update() as new objects.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, Optional, TypeVar

import numpy as np
import tvm_ffi
from tvm import s_tir

from ...features import DATAFLOW_COLUMNS, DATAFLOW_TOKENS, FEATURE_SCHEMA_VERSION, STATEMENT_COLUMNS, DeviceConstants
from ...features.draft_templates import DraftFeatures, DraftTemplates
from ...features.extract import ProgramFeatures, featurize_many
from ...features.gc_pause import gc_paused
from ...models.batch import Batch, make_batch
from ...tenset.step_vectors import STEP_DIM

T = TypeVar("T")


@dataclass
class FeatureTimes:
    """Where featurization time goes, for the tuning report."""

    draft_s: float = 0.0  # draft inputs of new programs
    full_s: float = 0.0
    key_s: float = 0.0  # structural hashes, for the full-features cache
    draft_programs: int = 0  # new to the draft stage
    full_programs: int = 0  # featurized (cache misses)
    same_object: int = 0  # draft inputs found by identity
    hits: int = 0  # full features found by structural hash
    failures: int = 0


class _LRU(Generic[T]):
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.items: OrderedDict[int, Optional[T]] = OrderedDict()

    def get(self, key: int) -> tuple[bool, Optional[T]]:
        if key in self.items:
            self.items.move_to_end(key)
            return True, self.items[key]
        return False, None

    def put(self, key: int, value: Optional[T]) -> None:
        self.items[key] = value
        if len(self.items) > self.capacity:
            self.items.popitem(last=False)


class CandidateFeatures:
    """Draft inputs (symbols + analytic score) and full training features of candidates; None for a
    program that cannot be featurized (it is then ranked last, never an error for the search)."""

    def __init__(self, target_kind: str, device: str | DeviceConstants | None = None, capacity: int = 50_000,
                 num_threads: int = 1, search_device: str | DeviceConstants | None = None,
                 schema: int = FEATURE_SCHEMA_VERSION):
        """device: the constants of the draft score in full features (the verifier's input, as it
        was trained); search_device: those the draft stage ranks the search with (default: device);
        schema: the feature schema of full features (the verifier's)."""
        self.target_kind = target_kind
        self.schema = schema
        self.device = device
        self.num_threads = num_threads  # for the native part of full features
        self.times = FeatureTimes()
        self.templates = DraftTemplates(target_kind, search_device if search_device is not None else device)
        # identity of a module -> (the module, kept alive so that its identity is not reused; its value)
        self._draft: _LRU[tuple[object, Optional[DraftFeatures]]] = _LRU(capacity)
        self._keys: _LRU[tuple[object, int]] = _LRU(capacity)
        self._full: _LRU[ProgramFeatures] = _LRU(capacity)

    def keys(self, schedules: list[s_tir.Schedule]) -> list[int]:
        """The structural hash of each candidate's module."""
        start = time.perf_counter()
        out = []
        for sch in schedules:
            mod = sch.mod
            found, entry = self._keys.get(hash(mod))
            if not found:
                entry = (mod, tvm_ffi.structural_hash(mod))
                self._keys.put(hash(mod), entry)
            out.append(entry[1])
        self.times.key_s += time.perf_counter() - start
        return out

    def draft(self, schedules: list[s_tir.Schedule]) -> list[Optional[DraftFeatures]]:
        mods = [sch.mod for sch in schedules]
        new: dict[int, object] = {}
        for mod in mods:
            if hash(mod) not in self._draft.items:
                new.setdefault(hash(mod), mod)
        self.times.same_object += len(mods) - len(new)
        if new:
            start = time.perf_counter()
            for mod, value in zip(new.values(), self.templates.draft([m["main"] for m in new.values()])):
                self._draft.put(hash(mod), (mod, value))
                self.times.failures += value is None
            self.times.draft_s += time.perf_counter() - start
            self.times.draft_programs += len(new)
        return [self._draft.get(hash(m))[1][1] for m in mods]

    def use_schema(self, schema: int) -> None:
        """Full features of feature schema ``schema`` from now on (a verifier of another schema loaded)."""
        if schema != self.schema:
            self.schema = schema
            self._full = _LRU(self._full.capacity)

    def full(self, schedules: list[s_tir.Schedule]) -> list[Optional[ProgramFeatures]]:
        with gc_paused():
            return self._full_features(schedules)

    def _full_features(self, schedules: list[s_tir.Schedule]) -> list[Optional[ProgramFeatures]]:
        keys = self.keys(schedules)
        values: dict[int, Optional[ProgramFeatures]] = {}  # of this call: no second lookup, no eviction
        misses: dict[int, s_tir.Schedule] = {}
        for key, sch in zip(keys, schedules):
            found, value = self._full.get(key)
            if found:
                self.times.hits += 1
                values[key] = value
            else:
                misses.setdefault(key, sch)
        if misses:
            start = time.perf_counter()
            for key, value in zip(misses, self._featurize(list(misses.values()))):
                self._full.put(key, value)
                values[key] = value
                self.times.failures += value is None
            self.times.full_s += time.perf_counter() - start
            self.times.full_programs += len(misses)
        return [values[key] for key in keys]

    def _featurize(self, schedules: list[s_tir.Schedule]) -> list[Optional[ProgramFeatures]]:
        # a program that fails is ranked last; the search goes on
        got = featurize_many(schedules, self.target_kind, self.device, self.num_threads, self.schema)
        return [None if isinstance(f, Exception) else f for f in got]


def draft_batch(items: list[DraftFeatures]) -> Batch:
    """Draft inputs as the models' forward() expects them; fields the draft model does not read are zero."""
    n = len(items)
    symbols = np.concatenate([d.symbols for d in items])
    return make_batch(np.zeros((len(symbols), len(STATEMENT_COLUMNS))), symbols, [len(d.symbols) for d in items],
                      np.zeros((n, len(DATAFLOW_TOKENS), len(DATAFLOW_COLUMNS))), np.zeros((n, 1, STEP_DIM)),
                      np.array([d.draft_score for d in items]))


def features_batch(items: list[ProgramFeatures]) -> Batch:
    """Training features of programs as one Batch (steps are zero: TLP is not a tuning model)."""
    return make_batch(np.concatenate([f.statements for f in items]), np.concatenate([f.symbols for f in items]),
                      [len(f.statements) for f in items], np.stack([f.dataflow for f in items]),
                      np.zeros((len(items), 1, STEP_DIM)), np.array([f.draft_score for f in items]))
