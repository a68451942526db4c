"""Features of MetaSchedule candidates, cached by structural hash, and batched for our models.

The evolutionary search re-scores survivors every generation and measured candidates come back in
update(), so most programs are seen several times; the structural hash (~0.05 ms) is far cheaper
than featurizing (~0.7 ms for the draft inputs, 2-7 ms for everything).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Generic, Optional, TypeVar

import numpy as np
import tvm_ffi
from tvm import s_tir

from ..features import DATAFLOW_COLUMNS, DATAFLOW_TOKENS, STATEMENT_COLUMNS, DeviceConstants
from ..features.extract import DraftFeatures, ProgramFeatures, featurize_prim_func, psa_only
from ..models.batch import Batch, make_batch
from ..tenset.step_vectors import STEP_DIM

T = TypeVar("T")


@dataclass
class FeatureTimes:
    """Where featurization time goes, for the tuning report."""

    draft_s: float = 0.0
    full_s: float = 0.0
    draft_programs: int = 0  # featurized (cache misses)
    full_programs: int = 0
    hits: int = 0
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
        self._draft: _LRU[DraftFeatures] = _LRU(capacity)
        self._full: _LRU[ProgramFeatures] = _LRU(capacity)

    def _lookup(self, cache: _LRU[T], schedules: list[s_tir.Schedule],
                compute: Callable[[s_tir.Schedule], T], full: bool) -> list[Optional[T]]:
        out: list[Optional[T]] = []
        for sch in schedules:
            key = tvm_ffi.structural_hash(sch.mod)
            found, value = cache.get(key)
            if found:
                self.times.hits += 1
            else:
                start = time.perf_counter()
                try:
                    value = compute(sch)
                except Exception:  # noqa: BLE001 - TVM and alignment errors; the search goes on
                    value = None
                    self.times.failures += 1
                spent = time.perf_counter() - start
                if full:
                    self.times.full_s += spent
                    self.times.full_programs += 1
                else:
                    self.times.draft_s += spent
                    self.times.draft_programs += 1
                cache.put(key, value)
            out.append(value)
        return out

    def draft(self, schedules: list[s_tir.Schedule]) -> list[Optional[DraftFeatures]]:
        return self._lookup(self._draft, schedules,
                            lambda s: psa_only(s, self.target_kind, self.device), full=False)

    def full(self, schedules: list[s_tir.Schedule]) -> list[Optional[ProgramFeatures]]:
        return self._lookup(self._full, schedules,
                            lambda s: featurize_prim_func(s, self.target_kind, self.device), full=True)


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
