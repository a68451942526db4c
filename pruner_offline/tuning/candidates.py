"""Features of MetaSchedule candidates, cached by structural hash, and batched for our models.

The evolutionary search re-scores survivors every generation and measured candidates come back in
update(), so most programs are seen several times. A program met again as the same object (a
survivor) is found by identity (~1 us); one rebuilt with the same content by its structural hash
(~0.1 ms); only new programs are walked (~0.5 ms for the draft inputs, whose scores are computed
for the whole batch at once) and featurized (2-7 ms, reusing the draft stage's walk).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, Optional, TypeVar

import numpy as np
import tvm_ffi
from tvm import s_tir

from ..features import DATAFLOW_COLUMNS, DATAFLOW_TOKENS, STATEMENT_COLUMNS, DeviceConstants
from ..features.extract import DraftFeatures, ProgramFeatures, featurize_prim_func, psa_batch
from ..models.batch import Batch, make_batch
from ..tenset.step_vectors import STEP_DIM

T = TypeVar("T")


@dataclass
class FeatureTimes:
    """Where featurization time goes, for the tuning report."""

    draft_s: float = 0.0  # draft inputs of new programs
    full_s: float = 0.0
    key_s: float = 0.0  # finding programs seen before
    draft_programs: int = 0  # featurized (cache misses)
    full_programs: int = 0
    same_object: int = 0  # found by identity
    hits: int = 0  # found by structural hash
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

    def __init__(self, target_kind: str, device: str | DeviceConstants | None = None, capacity: int = 50_000):
        self.target_kind = target_kind
        self.device = device
        self.times = FeatureTimes()
        # identity of a module -> (the module, kept alive so that its identity is not reused; its key)
        self._by_object: _LRU[tuple[object, int]] = _LRU(capacity)
        self._draft: _LRU[DraftFeatures] = _LRU(capacity)
        self._full: _LRU[ProgramFeatures] = _LRU(capacity)

    def keys(self, schedules: list[s_tir.Schedule]) -> list[int]:
        """The structural hash of each candidate's module."""
        start = time.perf_counter()
        out = []
        for sch in schedules:
            mod = sch.mod
            found, entry = self._by_object.get(hash(mod))
            if found:
                self.times.same_object += 1
                out.append(entry[1])
                continue
            key = tvm_ffi.structural_hash(mod)
            self._by_object.put(hash(mod), (mod, key))
            out.append(key)
        self.times.key_s += time.perf_counter() - start
        return out

    def draft(self, schedules: list[s_tir.Schedule]) -> list[Optional[DraftFeatures]]:
        keys = self.keys(schedules)
        new: dict[int, s_tir.Schedule] = {}
        for key, sch in zip(keys, schedules):
            if key not in self._draft.items:
                new.setdefault(key, sch)
        self.times.hits += len(keys) - len(new)
        if new:
            start = time.perf_counter()
            for key, value in zip(new, psa_batch(list(new.values()), self.target_kind, self.device)):
                self._draft.put(key, value)
                self.times.failures += value is None
            self.times.draft_s += time.perf_counter() - start
            self.times.draft_programs += len(new)
        return [self._draft.get(k)[1] for k in keys]

    def full(self, schedules: list[s_tir.Schedule]) -> list[Optional[ProgramFeatures]]:
        out: list[Optional[ProgramFeatures]] = []
        for key, sch in zip(self.keys(schedules), schedules):
            found, value = self._full.get(key)
            if not found:
                start = time.perf_counter()
                _, draft = self._draft.get(key)
                try:
                    value = featurize_prim_func(sch, self.target_kind, self.device,
                                                walked=draft.walked if draft is not None else None)
                except Exception:  # noqa: BLE001 - TVM and alignment errors; the search goes on
                    value = None
                    self.times.failures += 1
                self.times.full_s += time.perf_counter() - start
                self.times.full_programs += 1
                self._full.put(key, value)
            out.append(value)
        return out


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
