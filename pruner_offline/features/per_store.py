"""Ansor's 164 per-store features, computed by MetaSchedule's C++ PerStoreFeature on a PrimFunc.

The extractor only reads the target's keys from its TuneContext, so the context is built through the
raw FFI constructor: the Python TuneContext constructor imports tvm.s_tir.tensor_intrin (~20 s).
Both objects are immutable after construction, hence safe to cache per target kind.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import tvm
from tvm import s_tir, tirx
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule import _ffi_api

from .schema import ARITH_INTENSITY_SAMPLES, BUFFERS_PER_STORE, PER_STORE_COLUMNS


@lru_cache(maxsize=None)
def _extractor(target_kind: str) -> tuple[ms.FeatureExtractor, ms.TuneContext]:
    # PerStoreFeature's is_gpu flag comes from the target keys alone; other attributes are unused.
    # An explicit arch keeps Target from probing for a CUDA toolkit; the arch itself is unused.
    arch = {"arch": "sm_80"} if target_kind == "cuda" else {}
    target = tvm.target.Target({"kind": target_kind, **arch})
    context = _ffi_api.TuneContext(None, target, None, None, "main", 1, -1, None)
    extractor = ms.feature_extractor.PerStoreFeature(
        buffers_per_store=BUFFERS_PER_STORE,
        arith_intensity_curve_num_samples=ARITH_INTENSITY_SAMPLES,
        cache_line_bytes=64,
    )
    return extractor, context


def per_store_features(program: tirx.PrimFunc | s_tir.Schedule, target_kind: str) -> np.ndarray:
    """[n_statements, 164] float32, one row per written buffer as PerStoreFeature orders them.

    Passing the Schedule a caller already holds saves building one (~20% of the time).
    """
    extractor, context = _extractor(target_kind)
    sch = program if isinstance(program, s_tir.Schedule) else s_tir.Schedule(program)
    candidate = ms.MeasureCandidate(sch, [])
    rows = extractor.extract_from(context, [candidate])[0].numpy()
    return rows.reshape(-1, len(PER_STORE_COLUMNS)).astype(np.float32)
