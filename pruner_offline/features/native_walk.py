"""tir_walk.walk of a batch of programs in one native call (native_walk.cc, built by native.py).

The Python walk's time was FFI reads of fields and Python callbacks of tvm-ffi's structural walk,
one per expression node (0.45 ms a tenset-mini cuda record, 0.2 ms an llvm one). The native walk
reads the same nodes in the same order (tvm-ffi's own structural walk engine for expressions) and
returns each program as integers and strings, from which the same WalkResult is rebuilt here: loop
keys are the loop variables' addresses, which is what Python's ``hash`` of an FFI object gives.
tir_walk.walk stays the reference, and what is used where there is no native code;
tests/test_native_walk.py compares the two.
"""

from __future__ import annotations

from typing import Optional

import tvm
from tvm import tirx

from .native import compiled
from .tir_walk import Access, Loop, Statement, WalkResult, items, loop_kind, walk

_COMM_REDUCE = int(tirx.IterVar.CommReduce)
_FMA = tvm.ir.Op.get("tirx.fma")
_IF_THEN_ELSE = tvm.ir.Op.get("prim.if_then_else")


def walks(funcs: list) -> Optional[list[Optional[WalkResult]]]:
    """Each PrimFunc's walk (None where it cannot be read); None where there is no native code."""
    module = compiled()
    if module is None:
        return None
    ints, int_ends, strings, string_ends, failed = items(module.tir_walks(funcs, _COMM_REDUCE, _FMA, _IF_THEN_ELSE))
    strings = items(strings)
    failed = set(failed)
    out: list[Optional[WalkResult]] = []
    int_start = string_start = 0
    for i, (int_end, string_end) in enumerate(zip(int_ends, string_ends)):
        out.append(None if i in failed else _decode(ints[int_start:int_end], strings[string_start:string_end]))
        int_start, string_start = int_end, string_end
    return out


def fast_walk(func: tirx.PrimFunc) -> WalkResult:
    """tir_walk.walk(func), natively where it can; a program the native walk cannot read is walked
    in Python, which raises what is wrong with it."""
    native = walks([func])
    return native[0] if native and native[0] is not None else walk(func)


def _decode(ints: tuple, strings: list) -> WalkResult:
    """native_walk.cc's Walker::Encode, back into the walk's named tuples."""
    n, pos = ints[0], 1
    loops = []
    for _ in range(n):
        key, extent, kind, tag = ints[pos:pos + 4]
        thread_tag = strings[tag] if tag >= 0 else ""
        loops.append(Loop(key, extent, loop_kind(kind, thread_tag), thread_tag))
        pos += 4
    n, pos = ints[pos], pos + 1
    buffers = []
    for _ in range(n):
        name, scope, elem_bytes, numel = ints[pos:pos + 4]
        buffers.append((strings[name], strings[scope], elem_bytes, numel))
        pos += 4

    def access() -> Access:
        nonlocal pos
        buffer, n_keys = ints[pos], ints[pos + 1]
        pos += 2 + n_keys
        return Access(*buffers[buffer], frozenset(ints[pos - n_keys:pos]))

    rows, inits = [], []
    n, pos = ints[pos], pos + 1
    for _ in range(n):
        constant, block, has_reduce, float_ops, other_float_ops, guard_ops, n_loops = ints[pos:pos + 7]
        pos += 7 + n_loops
        stmt_loops = tuple(loops[i] for i in ints[pos - n_loops:pos])
        write = access()
        n_reads, pos = ints[pos], pos + 1
        reads = tuple(access() for _ in range(n_reads))
        stmt = Statement(strings[block], stmt_loops, write, reads, float_ops, other_float_ops, bool(has_reduce),
                         guard_ops)
        (inits if constant else rows).append(stmt)
    return WalkResult(tuple(rows), tuple(inits))
