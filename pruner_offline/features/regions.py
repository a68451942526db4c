"""Buffer-access (B0..B4) and arithmetic-intensity columns of the per-store features, with the
touched region of every loop level bounded correctly.

PerStoreFeature bounds the region a statement touches below each of its loops with one analyzer:
it first binds every loop variable to its loop's minimum, then re-binds the variables to their
ranges from the innermost loop out. The re-binding updates the constant bound of a variable but not
its modular set, which keeps saying "exactly the minimum", so ``floormod(fused, 14)`` of a fused
loop over [0, 392) is bounded to [0, 0]. Every index of a fused loop that goes through a floormod
then touches one row where it touches the whole tensor, and the touched bytes, unique lines, reuse
distances and the arithmetic-intensity curve built on them are off by the fused extent. Ansor
builds a fresh analyzer per loop level; this module binds in the order that cannot go stale.

The columns are otherwise PerStoreFeature's (same sort of a statement's buffers, same approximate
strides and ratios) but for three more differences it has from Ansor (docs/replay.md, #7, #12, #13):
- a reduction's initial store, which neither gives a row, still counts in Ansor as an access of
  its buffer, so a later reader of the buffer finds serial reuse over three accesses, not two;
- Ansor keys the accesses under a loop by the loop node's address, and the node it makes for a
  thread extent lives only while its body is visited: the next thread extent at the same depth
  gets the same memory and inherits the accesses of its predecessor (the previous kernel's, or a
  sibling shared-memory fetch's). ``_Collector.key`` reproduces that aliasing;
- for a buffer's contiguous bytes (which divide its unique lines) Ansor compares the buffer's
  shape with the region of the last buffer its hash map visits, not its own: the written buffer,
  since that map visits in reverse insertion order, and the written buffer goes in first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import tvm
from tvm import s_tir, tirx
from tvm.ir.expr import Expr, TensorLoad
from tvm.s_tir import transform as st
from tvm.sym import Analyzer

from .ansor_view import THREAD_MARK
from .schema import ARITH_INTENSITY_SAMPLES, BUFFERS_PER_STORE

CACHE_LINE_BYTES = 64
N_COLUMNS = 18 * BUFFERS_PER_STORE + ARITH_INTENSITY_SAMPLES

_READ, _WRITE, _READ_WRITE = 0, 1, 2
_LOOP_READ, _SERIAL_READ_WRITE, _NO_REUSE = 0, 1, 2

def per_store_feature_passes(simplify: bool = True) -> list[tvm.transform.Pass]:
    """PerStoreFeature's own preprocessing, in its order, less its SimplifyForFeatureExtraction
    (not exposed to Python); ``simplify=False`` also leaves out the two Simplify passes."""
    simplified = [st.StmtSimplify()] if simplify else []
    return [st.RemoveWeightLayoutRewriteBlock(True), st.LowerCrossThreadReduction(), st.LowerInitBlock(),
            st.PlanAndUpdateBufferAllocationLocation(), st.ConvertBlocksToOpaque(), st.CompactBufferAllocation(),
            *simplified, st.LowerAutoCopy(), st.UnifyThreadBinding(), st.LowerMatchBuffer(), *simplified]


def lowered_as_per_store_feature(func: tirx.PrimFunc, simplify: bool = True) -> tirx.PrimFunc:
    """``func`` after ``per_store_feature_passes``: SimplifyForFeatureExtraction's removal of unit
    loops is left to the caller's walk, its folding of load-free selects changes no access.
    ``simplify=False`` is how the TIR walk of the stored features is defined."""
    passes = tvm.transform.Sequential(per_store_feature_passes(simplify))
    return passes(tvm.IRModule({"main": func}))["main"]


def _slog(x: float) -> float:
    return float(np.log2(abs(x) + 1))


def _children(e) -> Iterator:
    for name in ("a", "b", "value", "condition", "true_value", "false_value"):
        child = getattr(e, name, None)
        if isinstance(child, Expr):
            yield child
    for name in ("indices", "args"):
        yield from getattr(e, name, None) or ()


def _loads(e, out: list) -> None:
    """Loads of ``e`` in post order (a load's indices before the load)."""
    for c in _children(e):
        _loads(c, out)
    if isinstance(e, TensorLoad):
        out.append(e)


def _coefficient(e, var: tirx.Var) -> int:
    """PerStoreFeature's approximate coefficient of ``var`` in ``e``: 1 for a bare or added
    variable, the constant of a multiplication, 2 when neither applies, 0 without the variable."""
    state = {"var": False, "mul": False, "add": False, "stride": 0}

    def visit(x) -> None:
        for c in _children(x):
            visit(c)
        if isinstance(x, tirx.Var) and x.same_as(var):
            state.update(var=True, stride=2)
        elif isinstance(x, tirx.Mul) and state["var"] and not state["add"]:
            for side in (x.a, x.b):
                if isinstance(side, tirx.IntImm):
                    state.update(mul=True, stride=side.value)
                    break
        elif isinstance(x, tirx.Add) and state["var"] and not state["mul"]:
            state.update(add=True, stride=1)

    visit(e)
    if state["var"] and not state["mul"] and not state["add"]:
        return 1
    return state["stride"] if state["var"] else 0


def _dtype_bytes(buffer) -> int:
    return max(1, tvm.DataType(str(buffer.dtype)).bits // 8)


def _touched_bytes(under: dict) -> int:
    return sum(sum(counts) * _dtype_bytes(buffer) for buffer, counts in under.values())


def _int(e, default: int = 1) -> int:
    return int(e.value) if isinstance(e, tirx.IntImm) else default


@dataclass
class _Access:
    buffer: object
    kind: int
    indices: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.buffer.name)

    @property
    def dtype_bytes(self) -> int:
        return _dtype_bytes(self.buffer)

    @property
    def shape(self) -> list[int]:
        return [_int(d) for d in self.buffer.shape]


class _Collector:
    def __init__(self, float_ops: np.ndarray) -> None:
        self.float_ops = float_ops  # per row, over the statement's whole loop nest
        self.loops: list[tirx.For] = []
        self.points: list[tirx.For] = []  # unit loops the extractor removes: their variable is the minimum
        self.touched_under: dict[int, dict[int, tuple[object, list[int]]]] = {}
        self.rows: dict[int, np.ndarray] = {}  # buffer -> columns of its last non-constant store
        self.row_of: dict[int, int] = {}  # buffer -> its row: the order of first stores
        self.guards: list = []  # conditions of the enclosing ifs

    def visit(self, stmt) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self.visit(s)
        elif isinstance(stmt, tirx.For):
            unit = _int(stmt.extent, 0) == 1 and stmt.kind == tirx.ForKind.SERIAL and not stmt.annotations
            (self.points if unit else self.loops).append(stmt)
            self.visit(stmt.body)
            (self.points if unit else self.loops).pop()
        elif isinstance(stmt, s_tir.SBlockRealize):
            self.visit(stmt.block.body)
        elif isinstance(stmt, tirx.IfThenElse):
            self.guards.append(stmt.condition)
            self.visit(stmt.then_case)
            self.guards.pop()
            if stmt.else_case is not None:
                self.visit(stmt.else_case)
        elif isinstance(stmt, tirx.BufferStore):
            if isinstance(stmt.value, (tirx.IntImm, tirx.FloatImm)):
                self.init(stmt)
            else:
                # a buffer keeps the row of its first store and the values of its last
                key = hash(stmt.buffer)
                row = self.row_of.setdefault(key, len(self.row_of))
                self.rows[key] = self.store(stmt, self.float_ops[row])
        elif hasattr(stmt, "body"):
            self.visit(stmt.body)

    def init(self, store: tirx.BufferStore) -> None:
        """A reduction's initial store has no row (PerStoreFeature skips constant stores) but, as
        in Ansor, counts as an access of its buffer in the loops TE's separate init nest shares
        with the update: those outside the first loop the init's guard (``k == 0``) tests."""
        guard_vars: set[int] = set()
        for cond in self.guards:
            self.collect_vars(cond, guard_vars)
        shared = next((i for i, loop in enumerate(self.loops) if hash(loop.loop_var) in guard_vars),
                      len(self.loops))
        write = _Access(store.buffer, _WRITE, [list(store.indices)])
        for i, ana in self.levels():
            if i >= shared:
                break
            count = self.numel(write, ana)[0]
            self.touched_under.setdefault(self.key(i), {}).setdefault(
                hash(store.buffer), (store.buffer, []))[1].append(count)

    @staticmethod
    def numel(a: "_Access", ana: Analyzer) -> tuple[int, list[int]]:
        """Elements of ``a``'s buffer its indices touch under ``ana``'s bindings, and the extents."""
        dims = []
        for d in range(len(a.indices[0])):
            bounds = [ana.const_int_bound(idx[d]) for idx in a.indices]
            dims.append(max(b.max_value for b in bounds) - min(b.min_value for b in bounds) + 1)
        return max(0, math.prod(dims)), dims

    def accesses(self, store: tirx.BufferStore) -> list[_Access]:
        by_buffer = {hash(store.buffer): _Access(store.buffer, _WRITE, [list(store.indices)])}
        loads: list = []
        _loads(store.value, loads)
        for load in loads:
            acc = by_buffer.setdefault(hash(load.source), _Access(load.source, -1))
            acc.kind = _READ_WRITE if acc.kind in (_WRITE, _READ_WRITE) else _READ
            if acc.kind != _READ_WRITE:
                acc.indices.append(list(load.indices))
        return list(by_buffer.values())

    def key(self, level: int) -> object:
        """The identity Ansor's extractor gives a loop. A thread extent becomes a loop node made
        for its visit and freed after it, so the node of the next thread extent at the same depth
        of thread extents reuses its memory, and its accesses pile up on those of its predecessor."""
        loop = self.loops[level]
        if loop.thread_binding is None and THREAD_MARK not in loop.annotations:
            return hash(loop)
        return ("thread", sum(1 for outer in self.loops[:level]
                              if outer.thread_binding is not None or THREAD_MARK in outer.annotations))

    def levels(self) -> Iterator[tuple[int, Analyzer]]:
        """(level, analyzer with the loops outside ``level`` at their minimum and the others over
        their range), outermost level first. One analyzer serves all levels because it only ever
        narrows a range to a point; the other way round its modular set keeps the point."""
        ana = Analyzer()
        for loop in self.points:
            ana.bind(loop.loop_var, loop.min)
        for loop in self.loops:
            ana.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
        for level, loop in enumerate(self.loops):
            yield level, ana
            ana.bind(loop.loop_var, loop.min, allow_override=True)

    def store(self, store: tirx.BufferStore, float_ops: float) -> np.ndarray:
        loops, accesses = self.loops, self.accesses(store)
        n = len(loops)
        extents = [_int(loop.extent) for loop in loops]
        prod = math.prod(extents)
        numel = {hash(a.buffer): 1 for a in accesses}
        shape_at_top = {hash(a.buffer): [1] * len(a.shape) for a in accesses}
        touched_bytes = [0] * n
        for i, ana in self.levels():
            under = self.touched_under.setdefault(self.key(i), {})
            for a in accesses:
                count, dims = self.numel(a, ana)
                if i == 0:
                    numel[hash(a.buffer)], shape_at_top[hash(a.buffer)] = count, dims
                touched_bytes[i] += count * a.dtype_bytes
                under.setdefault(hash(a.buffer), (a.buffer, []))[1].append(count)
        top_touch_bytes = sum(a.dtype_bytes for a in accesses) if n else 0
        written = shape_at_top[hash(store.buffer)]
        subs = [self.sub_feature(a, extents, prod, numel[hash(a.buffer)], written, top_touch_bytes)
                for a in accesses]
        subs.sort(key=lambda s: (-s["lines"], -s["bytes"], s["name"]))
        out = np.zeros(N_COLUMNS, np.float64)
        for k, s in enumerate(subs[:BUFFERS_PER_STORE]):
            out[18 * k: 18 * (k + 1)] = s["row"]
        out[18 * BUFFERS_PER_STORE:] = self.curve(float_ops / prod, extents, touched_bytes)
        return out

    def sub_feature(self, a: _Access, extents: list[int], prod: int, numel: int, written: list[int],
                    top_touch_bytes: int) -> dict:
        loops, n = self.loops, len(self.loops)
        shape = a.shape
        strides = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * shape[d + 1]
        continuous = a.dtype_bytes
        for d in range(min(len(written), len(shape)) - 1, -1, -1):
            if written[d] == shape[d]:
                continuous *= written[d]
                break
        stride, i = 0, n - 1
        while i >= 0:
            stride = self.var_stride(a.indices, strides, loops[i].loop_var)
            if stride:
                break
            i -= 1
        innermost_stride = stride if i == n - 1 else 0
        non_strided = math.prod(extents[i + 1:])

        region_vars: set[int] = set()
        for idx in a.indices:
            for e in idx:
                self.collect_vars(e, region_vars)
        reuse, dis_iter, dis_bytes, reuse_ct = _NO_REUSE, 0.0, 0.0, 0
        for j in range(n - 1, -1, -1):
            if hash(loops[j].loop_var) not in region_vars:
                reuse, reuse_ct = _LOOP_READ, extents[j]
                dis_iter = float(math.prod(extents[j + 1:]))
                if j == n - 1:
                    dis_bytes = float(top_touch_bytes)
                else:
                    dis_bytes = float(_touched_bytes(self.touched_under[self.key(j + 1)]))
                break
            touched = self.touched_under[self.key(j)][hash(a.buffer)][1]
            if len(touched) >= 2:
                reuse, reuse_ct = _SERIAL_READ_WRITE, len(touched) - 1
                dis_iter = min(touched) / extents[j]
                dis_bytes = _touched_bytes(self.touched_under[self.key(j)]) / extents[j]
                break

        nbytes = a.dtype_bytes * prod
        if n:
            unique_bytes = numel * a.dtype_bytes
            lines = max(1.0, prod / non_strided * min(1.0, stride * a.dtype_bytes / CACHE_LINE_BYTES))
            unique_lines = max(1.0, unique_bytes / min(CACHE_LINE_BYTES, continuous))
        else:
            unique_bytes, lines, unique_lines = 1, 1.0, 1.0
        proxy = reuse_ct if reuse_ct > 0 else 0.5
        row = [float(a.kind == _READ), float(a.kind == _WRITE), float(a.kind == _READ_WRITE),
               _slog(nbytes), _slog(unique_bytes), _slog(lines), _slog(unique_lines),
               float(reuse == _LOOP_READ), float(reuse == _SERIAL_READ_WRITE), float(reuse == _NO_REUSE),
               _slog(dis_iter), _slog(dis_bytes), _slog(reuse_ct),
               _slog(nbytes / proxy), _slog(unique_bytes / proxy), _slog(lines / proxy),
               _slog(unique_lines / proxy), _slog(innermost_stride)]
        return {"lines": lines, "bytes": nbytes, "name": a.name, "row": row}

    @staticmethod
    def var_stride(indices: list, strides: list[int], var: tirx.Var) -> int:
        best = None
        for idx in indices:
            for d in range(len(idx) - 1, -1, -1):
                coef = _coefficient(idx[d], var)
                if coef:
                    best = min(best, abs(coef) * strides[d]) if best is not None else abs(coef) * strides[d]
                    break
        return best or 0

    @staticmethod
    def collect_vars(e, out: set[int]) -> None:
        if isinstance(e, tirx.Var):
            out.add(hash(e))
        for c in _children(e):
            _Collector.collect_vars(c, out)

    @staticmethod
    def curve(ops_per_iteration: float, extents: list[int], touched_bytes: list[int]) -> list[float]:
        n = len(extents)
        memory = touched_bytes[::-1]  # innermost level first, as the compute below
        compute, total = [], float(ops_per_iteration)
        for i in range(n - 1, -1, -1):
            total *= extents[i]
            compute.append(total)
        if total <= 0 or not compute:
            return [0.0] * ARITH_INTENSITY_SAMPLES
        out, p = [], 0
        for k in range(ARITH_INTENSITY_SAMPLES):
            target = (k + 1) / ARITH_INTENSITY_SAMPLES * compute[-1]
            while p < n and compute[p] < target - 1e-4:
                p += 1
            if p == 0:
                value = compute[0] / memory[0]
            else:
                base = compute[p - 1] / memory[p - 1]
                slope = (compute[p] / memory[p] - base) / (compute[p] - compute[p - 1])
                value = base + slope * (target - compute[p - 1])
            out.append(_slog(value))
        return out


def access_columns(func: tirx.PrimFunc, float_ops: np.ndarray) -> np.ndarray:
    """[n_statements, 100]: B0..B4 (18 each) and the arithmetic-intensity curve of every
    statement, rows in PerStoreFeature's order (first non-constant store of each buffer).

    float_ops: per row, the float operations PerStoreFeature counts for the statement over its
    loop nest (after its own folding of constant matrices, which this module does not repeat).
    """
    lowered = lowered_as_per_store_feature(func)
    collector = _Collector(float_ops)
    collector.visit(lowered.body)
    return np.array(list(collector.rows.values()), np.float32).reshape(-1, N_COLUMNS)
