"""The per-store features of schema 3: native_per_store.cc reads the 164 columns from the TIR as a
schedule leaves it, without MetaSchedule's PerStoreFeature and its lowering passes.

The columns keep PerStoreFeature's names, order and log scaling (schema.PER_STORE_COLUMNS), and
its rules where they are rules of the program (docs/features.md §8 says where the values differ).
Rows are the TIR walk's: one per written buffer, in the order of its first non-constant store.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import tvm
from tvm import tirx

from .native import compiled
from .schema import PER_STORE_COLUMNS

_COMM_REDUCE = int(tirx.IterVar.CommReduce)
_FMA = tvm.ir.Op.get("tirx.fma")
_IF_THEN_ELSE = tvm.ir.Op.get("prim.if_then_else")


class NativeFeaturesUnavailable(RuntimeError):
    """The native readers did not build here (native.py logged why)."""


def per_store_rows(funcs: list, is_gpu: bool) -> list[Optional[np.ndarray]]:
    """[n_statements, 164] float32 of each PrimFunc, None where one cannot be read."""
    module = compiled()
    if module is None:
        raise NativeFeaturesUnavailable(
            "feature schema 3 needs the package's native TIR readers, which did not build here "
            "(a C++ compiler is needed at first use; the log above says why)")
    data, counts, failed = module.per_store_rows(funcs, is_gpu, _COMM_REDUCE, _FMA, _IF_THEN_ELSE)
    values = np.frombuffer(bytes(data), dtype=np.float32).reshape(-1, len(PER_STORE_COLUMNS))
    failed = set(failed)
    out: list[Optional[np.ndarray]] = []
    start = 0
    for i, n in enumerate(counts):
        out.append(None if i in failed else values[start:start + n].copy())
        start += n
    return out
