"""The package's C++ readers of TIR, compiled at first use.

Reading a node's field from Python costs an FFI call each (50-150 ns, ~350 ns for a name), which
was most of the time of the draft stage's loop skeleton (native_skeleton.py) and of the TIR walk
behind every stored feature (native_walk.py). The readers (native_*.cc) read the same fields
through tvm-ffi's reflection table (the wheel has no TIR headers) and are compiled as one module
with tvm-ffi's build helper into its cache directory, keyed by the sources' hash, so only the
first process of a machine pays the compile (~7 s on one core). Where they cannot be built (no
compiler, a TVM whose TIR fields moved), the reason is logged once and callers use the Python
passes, which are the reference.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Optional, Sequence

import tvm  # noqa: F401 - registers the TIR types the readers look up by key

_SOURCES = ("native_reflect.cc", "native_skeleton.cc", "native_walk.cc", "native_per_store.cc")
FUNCTIONS = ("loop_skeletons", "tir_walks", "per_store_rows")
_log = logging.getLogger(__name__)


def build(sources: Sequence[str]) -> Optional[object]:
    """The compiled module of ``sources`` (C++ text, one translation unit in this order), or None
    (logged) where it does not build or load."""
    try:
        from tvm_ffi.cpp import load_inline

        module = load_inline("pruner_native", cpp_sources=list(sources), functions=list(FUNCTIONS))
        # empty calls: each finds its types and fields, or says which one this TVM lacks
        module.loop_skeletons([], 0)
        module.tir_walks([], 0, None, None)
        module.per_store_rows([], False, 0, None, None)
        return module
    except Exception as err:  # noqa: BLE001 - any failure leaves the Python passes, which are correct
        reason = str(err).strip().splitlines()
        _log.warning("native TIR readers not built (%s): loops and statements are read in Python",
                     reason[0] if reason else type(err).__name__)
        return None


@functools.cache
def compiled() -> Optional[object]:
    here = Path(__file__).parent
    return build([(here / name).read_text() for name in _SOURCES])
