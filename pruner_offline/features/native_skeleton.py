"""tir_walk.skeleton of a whole population in one native call (native_skeleton.cc, built by
native.py): the draft stage's per-program cost.

Per program it gives what tir_walk.skeleton gives: the loops, stores and statement lists in
pre-order, written out as one bytes key (equal exactly where skeleton's shape lists are equal), and
the loops' extents and variables in the same order; and the loops of extent 1 as a bitmask.
"""

from __future__ import annotations

from typing import Optional

from tvm import tirx

from .native import compiled
from .tir_walk import items

_THREAD_BINDING = int(tirx.ForKind.THREAD_BINDING)

# key, extents, unit loops (bit i: loop i has extent 1), loop variables
Skeleton = tuple[bytes, tuple[int, ...], int, object]


def skeletons(funcs: list) -> Optional[list[Optional[Skeleton]]]:
    """Each PrimFunc's skeleton (None where it cannot be read); None where there is no native code."""
    module = compiled()
    if module is None:
        return None
    read = module.loop_skeletons(funcs, _THREAD_BINDING)
    keys, key_ends, extents, loop_ends, units, stride, loop_vars, failed = items(read)
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
