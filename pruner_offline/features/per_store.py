"""Ansor's 164 per-store features, computed by MetaSchedule's C++ PerStoreFeature on a PrimFunc.

The extractor only reads the target's keys and the thread count from its TuneContext, so the
context is built through the raw FFI constructor: the Python TuneContext constructor imports
tvm.s_tir.tensor_intrin (~20 s). Both objects are immutable after construction, hence safe to cache
per target kind and thread count.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import tvm
from tvm import s_tir, tirx
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule import _ffi_api

from .ansor_view import ansor_view
from .regions import N_COLUMNS as N_ACCESS_COLUMNS
from .regions import access_columns
from .schema import ARITH_INTENSITY_SAMPLES, BUFFER_GROUP_START, BUFFERS_PER_STORE, PER_STORE_COLUMNS


@lru_cache(maxsize=None)
def _extractor(target_kind: str, num_threads: int = 1) -> tuple[ms.FeatureExtractor, ms.TuneContext]:
    # PerStoreFeature's is_gpu flag comes from the target keys alone; other attributes are unused.
    # An explicit arch keeps Target from probing for a CUDA toolkit; the arch itself is unused.
    arch = {"arch": "sm_80"} if target_kind == "cuda" else {}
    target = tvm.target.Target({"kind": target_kind, **arch})
    context = _ffi_api.TuneContext(None, target, None, None, "main", num_threads, -1, None)
    extractor = ms.feature_extractor.PerStoreFeature(
        buffers_per_store=BUFFERS_PER_STORE,
        arith_intensity_curve_num_samples=ARITH_INTENSITY_SAMPLES,
        cache_line_bytes=64,
    )
    return extractor, context


_ALLOC_COLUMNS = np.array([c.startswith("alloc_") for c in PER_STORE_COLUMNS])
_FLOAT_OP_COLUMNS = np.array([c.startswith("float_") for c in PER_STORE_COLUMNS])
_ACCESS_COLUMNS = slice(BUFFER_GROUP_START, BUFFER_GROUP_START + N_ACCESS_COLUMNS)
_OUTER_PROD, _ALLOC_OUTER_PROD, _ALLOC_INNER_PROD = (
    PER_STORE_COLUMNS.index(c) for c in ("outer_prod", "alloc_outer_prod", "alloc_inner_prod"))


def per_store_features(program: tirx.PrimFunc | s_tir.Schedule, target_kind: str,
                       ansor: bool = False) -> np.ndarray:
    """[n_statements, 164] float32, one row per written buffer as PerStoreFeature orders them.

    ansor: the values Ansor's own extractor gives the TE program (features/ansor_view.py and
    features/regions.py; docs/replay.md), at 3-4.5 times the cost. Not what featurize stores.
    Passing the Schedule a caller already holds saves building one (~20% of the time).
    """
    rows = _extract(program, target_kind)
    if not ansor:
        return rows
    func = program.mod["main"] if isinstance(program, s_tir.Schedule) else program
    view_func = ansor_view(func)
    view = _extract(view_func, target_kind)
    if view.shape != rows.shape:
        raise ValueError(f"the Ansor view has {len(view)} statements, the program {len(rows)}")
    float_ops = (np.exp2(view[:, _FLOAT_OP_COLUMNS].astype(np.float64)) - 1).sum(1)
    view[:, _ACCESS_COLUMNS] = access_columns(view_func, float_ops)
    view[:, _ALLOC_COLUMNS] = rows[:, _ALLOC_COLUMNS]
    # the part of the statement's loops inside its allocation: the view's loops over the plain
    # program's allocation point (columns are log2(x + 1))
    outer = np.exp2(view[:, _OUTER_PROD].astype(np.float64)) - 1
    alloc_outer = np.exp2(rows[:, _ALLOC_OUTER_PROD].astype(np.float64)) - 1
    view[:, _ALLOC_INNER_PROD] = np.log2(outer / np.maximum(alloc_outer, 1) + 1)
    return view


def per_store_features_of_many(schedules: list[s_tir.Schedule], target_kind: str,
                               num_threads: int = 1) -> list[np.ndarray]:
    """``per_store_features`` of each schedule, in one native call that spreads the programs over
    ``num_threads`` threads (most of the time goes to the extractor's own lowering passes, which
    release the GIL). One program the extractor cannot read fails the whole call."""
    extractor, context = _extractor(target_kind, max(1, num_threads))
    out = extractor.extract_from(context, [ms.MeasureCandidate(sch, []) for sch in schedules])
    return [rows.numpy().reshape(-1, len(PER_STORE_COLUMNS)).astype(np.float32) for rows in out]


def _extract(program: tirx.PrimFunc | s_tir.Schedule, target_kind: str) -> np.ndarray:
    sch = program if isinstance(program, s_tir.Schedule) else s_tir.Schedule(program)
    return per_store_features_of_many([sch], target_kind)[0]
