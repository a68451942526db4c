"""tir_walk.skeleton of a whole population in one native call: the draft stage's per-program cost.

Reading a loop's variable, name, kind and extent from Python costs an FFI call each (50-150 ns,
~350 ns for a name), which was most of the draft's time per candidate. native_skeleton.cc reads
the same fields through tvm-ffi's reflection table (the wheel has no TIR headers), and is compiled
at first use with tvm-ffi's build helper into its cache directory, keyed by the source's hash, so
only the first process of a machine pays the compile (~2 s on one core). Where it cannot be built
(no compiler, a TVM whose TIR fields moved), the reason is logged once and callers use the Python
pass.

Per program it gives what tir_walk.skeleton gives: the loops, stores and statement lists in
pre-order, written out as one bytes key (equal exactly where skeleton's shape lists are equal), and
the loops' extents and variables in the same order; and the loops of extent 1 as a bitmask.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Callable, Optional

from tvm import tirx

from .tir_walk import items

_SOURCE = Path(__file__).with_name("native_skeleton.cc")
_THREAD_BINDING = int(tirx.ForKind.THREAD_BINDING)
_log = logging.getLogger(__name__)

# key, extents, unit loops (bit i: loop i has extent 1), loop variables
Skeleton = tuple[bytes, tuple[int, ...], int, object]


def build(source: str) -> Optional[Callable]:
    """The compiled loop_skeletons of ``source``, or None (logged) where it does not build or load."""
    try:
        from tvm_ffi.cpp import load_inline

        module = load_inline("pruner_loop_skeletons", cpp_sources=source, functions="loop_skeletons")
        native = module.loop_skeletons
        native([], _THREAD_BINDING)  # finds its types and fields, or says which one this TVM lacks
        return native
    except Exception as err:  # noqa: BLE001 - any failure leaves the Python pass, which is correct
        reason = str(err).strip().splitlines()
        _log.warning("native loop skeleton not built (%s): the draft stage reads loops in Python",
                     reason[0] if reason else type(err).__name__)
        return None


@functools.cache
def compiled() -> Optional[Callable]:
    return build(_SOURCE.read_text())


def skeletons(funcs: list) -> Optional[list[Optional[Skeleton]]]:
    """Each PrimFunc's skeleton (None where it cannot be read); None where there is no native code."""
    native = compiled()
    if native is None:
        return None
    keys, key_ends, extents, loop_ends, units, stride, loop_vars, failed = items(native(funcs, _THREAD_BINDING))
    out: list[Optional[Skeleton]] = []
    key_start = loop_start = unit_start = 0
    for key_end, loop_end, variables in zip(key_ends, loop_ends, items(loop_vars)):
        unit_end = unit_start + stride
        out.append((keys[key_start:key_end], extents[loop_start:loop_end],
                    int.from_bytes(units[unit_start:unit_end], "little"), variables))
        key_start, loop_start, unit_start = key_end, loop_end, unit_end
    for i in failed:
        out[i] = None
    return out
