"""PSA symbols: 11 numbers per statement that the analytic draft score (and the learned draft model)
are built from, as specified in docs/psa-symbols.md.

Conventions where the published definition leaves room (docs/psa-symbols.md lists them):
- grid and block take each thread axis once (nested loops bound to one axis are one dimension).
- "inner" loops are serial, unrolled and vectorized loops and vthreads; thread/block bindings of any
  axis (x, y, z) are excluded, on CPU so are parallel loops, which play the role of the grid there
  (grid = product of parallel extents, block = 1).
- A loop "indexes" a buffer when its variable appears in the buffer's indices, after block iter vars
  are replaced by their bindings. Buffers keep their declared (uncompacted) shape in scheduled TIR,
  so a reduction loop outside a shared-memory copy indexes the shared buffer: SharedMemFootprint is
  then the elements a block stages through shared memory over the whole kernel, and DRAM_workload
  (= footprint x grid) the global traffic, rather than one stage's buffer size.
- A copy is a store without float arithmetic that reads another buffer; a copy into "shared*" gets
  SharedMemFootprint and DRAM_workload, other copies DRAM_workload = inner x grid x block, compute
  statements neither.
- Counts are in elements; `elem_bytes` carries the written dtype's size for the score.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from .schema import SYMBOL_COLUMNS
from .tir_walk import (BLOCK_IDX, PARALLEL, SERIAL, THREAD_IDX, UNROLLED, VECTORIZED, VTHREAD,
                       Statement)

_INNER_KINDS = frozenset({SERIAL, UNROLLED, VECTORIZED, VTHREAD})


@dataclass(frozen=True)
class PsaSymbols:
    values: np.ndarray  # [n, 11] float64, columns SYMBOL_COLUMNS
    elem_bytes: np.ndarray  # [n] bytes per element of the written buffer
    vector_extent: np.ndarray  # [n] extent of the innermost vectorized loop, 1 if none

    def column(self, name: str) -> np.ndarray:
        return self.values[:, SYMBOL_COLUMNS.index(name)]


def _extent_product(loops, keys=None) -> int:
    return prod(l.extent for l in loops if keys is None or l.key in keys)


def _launch_extent(loops, kind: str) -> int:
    # Nested loops bound to the same thread axis (a cooperative fetch under the compute's threadIdx
    # loop) share one hardware dimension: the launch has the largest extent per axis, not their product.
    per_axis: dict[str, int] = {}
    for l in loops:
        if l.kind == kind:
            per_axis[l.thread_tag] = max(per_axis.get(l.thread_tag, 1), l.extent)
    return prod(per_axis.values())


def _statement_symbols(stmt: Statement, is_gpu: bool) -> list[float]:
    if is_gpu:
        grid = _launch_extent(stmt.loops, BLOCK_IDX)
    else:
        grid = _extent_product(l for l in stmt.loops if l.kind == PARALLEL)
    block = _launch_extent(stmt.loops, THREAD_IDX)
    vthread = _extent_product(l for l in stmt.loops if l.kind == VTHREAD)
    inner_loops = [l for l in stmt.loops if l.kind in _INNER_KINDS]
    inner = _extent_product(inner_loops)
    f_t = inner * stmt.float_ops
    saxis = [l for l in inner_loops if l.key in stmt.write.loop_keys]
    buffers = {stmt.write.name: stmt.write} | {r.name: r for r in stmt.reads}
    reg_usage = sum(_extent_product(saxis, b.loop_keys) for b in buffers.values())
    mem_workload = sum(_extent_product(inner_loops, b.loop_keys) for b in buffers.values())
    shared_footprint = dram = 0
    if stmt.is_copy:
        if stmt.write.scope.startswith("shared"):
            shared_footprint = _extent_product(saxis) * block
            dram = shared_footprint * grid
        else:
            dram = inner * grid * block
    return [f_t, f_t * grid * block, reg_usage, mem_workload, shared_footprint, dram,
            1.0 + f_t / mem_workload, float(is_gpu), grid, block, vthread]


def _vector_extent(stmt: Statement) -> int:
    vectorized = [l.extent for l in stmt.loops if l.kind == VECTORIZED]
    return vectorized[-1] if vectorized else 1


def psa_symbols(stmts: tuple[Statement, ...], is_gpu: bool) -> PsaSymbols:
    values = np.array([_statement_symbols(s, is_gpu) for s in stmts], dtype=np.float64)
    return PsaSymbols(
        values.reshape(len(stmts), len(SYMBOL_COLUMNS)),
        np.array([s.write.elem_bytes for s in stmts], dtype=np.float64),
        np.array([_vector_extent(s) for s in stmts], dtype=np.float64),
    )
