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

Every symbol is a product of loop extents over some of a statement's loops, or a sum of such
products. So a statement is first reduced to its terms (which loops enter which product, no
extents), and the terms are then evaluated on extents: the extents of its own loops, or those of
many programs that share its loop structure (draft_templates.py, TermBank), all in one numpy pass.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from .schema import SYMBOL_COLUMNS
from .tir_walk import (BLOCK_IDX, PARALLEL, SERIAL, THREAD_IDX, UNROLLED, VECTORIZED, VTHREAD, Loop,
                       Statement)

_INNER_KINDS = frozenset({SERIAL, UNROLLED, VECTORIZED, VTHREAD})
_AXES = "xyz"
# the products of a statement's own loops (more below: two per buffer it touches)
_INNER, _PARALLEL, _VTHREAD, _SAXIS, _VECTOR = range(5)


@dataclass(frozen=True)
class PsaSymbols:
    values: np.ndarray  # [n, 11] float64, columns SYMBOL_COLUMNS
    elem_bytes: np.ndarray  # [n] bytes per element of the written buffer
    vector_extent: np.ndarray  # [n] extent of the innermost vectorized loop, 1 if none
    # [n] comparisons and logical ops of the if_then_else conditions (padding's bounds tests, inlined
    # or in its own stage) over the statement's inner loops: work the CPU score charges, not one of
    # the 11 symbols
    guard_work: np.ndarray
    # [n] the register tile of a reduction's update: elements of the written buffer indexed by the
    # inner loops inside its innermost inner reduction loop longer than 1, each updated once per
    # iteration of that loop; 0 for a statement that does not accumulate over such a loop
    accumulators: np.ndarray
    accumulator_vector: np.ndarray  # [n] extent of the vectorized loop among those loops, 1 if none

    def column(self, name: str) -> np.ndarray:
        return self.values[:, SYMBOL_COLUMNS.index(name)]


@dataclass(frozen=True)
class SymbolTerms:
    """Statement rows reduced to which loops enter each product, over loop columns 0..L-1 (rows of
    several programs may be stacked; unused loop columns and buffers are False).

    products[r, k, l]: loop l enters product k (_INNER.._VECTOR) of row r; per_buffer[r, 0, b, l]:
    l is a saxis loop indexing buffer b, per_buffer[r, 1, b, l]: an inner loop indexing b;
    launch[r, 0 or 1, axis, l]: l is bound to blockIdx / threadIdx on that axis (the launch extent
    of an axis is its largest such loop: nested loops on one axis share it); deeper[r, l, m]: l and m
    are inner loops of row r, m inside l."""

    products: np.ndarray  # [rows, 5, L] bool
    per_buffer: np.ndarray  # [rows, 2, B, L] bool
    launch: np.ndarray  # [rows, 2, 3, L] bool
    buffers: np.ndarray  # [rows, B] bool: buffer b is touched by row r
    float_ops: np.ndarray  # [rows]
    guard_ops: np.ndarray  # [rows]
    copy: np.ndarray  # [rows] bool
    into_shared: np.ndarray  # [rows] bool
    elem_bytes: np.ndarray  # [rows]
    deeper: np.ndarray  # [rows, L, L] bool
    accumulates: np.ndarray  # [rows] bool: the statement reads the buffer it writes (a reduction's update)


def symbol_terms(stmts: tuple[Statement, ...], column: dict[int, int]) -> SymbolTerms:
    """column: loop key -> its column (every loop of the statements has one)."""
    n_buffers = max([len({s.write.name} | {r.name for r in s.reads}) for s in stmts], default=0)
    n_loops = max(column.values(), default=-1) + 1
    # Cells are set in bytearrays, read by numpy once at the end: a template is made for every new
    # loop structure of a tuning run, and numpy's per-cell assignments were most of its cost.
    n, L, B, A = len(stmts), n_loops, n_buffers, len(_AXES)
    products, per_buffer = bytearray(n * 5 * L), bytearray(n * 2 * B * L)
    launch, touched = bytearray(n * 2 * A * L), bytearray(n * B)
    deeper = bytearray(n * L * L)
    for r, stmt in enumerate(stmts):
        accessed = list(({stmt.write.name: stmt.write} | {a.name: a for a in stmt.reads}).values())
        touched[r * B:r * B + len(accessed)] = b"\x01" * len(accessed)
        row = r * 5 * L
        vectorized = [l for l in stmt.loops if l.kind == VECTORIZED]
        inner = [column[l.key] for l in stmt.loops if l.kind in _INNER_KINDS]
        for a, outer in enumerate(inner):
            for c in inner[a + 1:]:
                deeper[(r * L + outer) * L + c] = 1
        if vectorized:
            products[row + _VECTOR * L + column[vectorized[-1].key]] = 1
        for loop in stmt.loops:
            c = column[loop.key]
            if loop.kind in (BLOCK_IDX, THREAD_IDX):
                launch[((r * 2 + (loop.kind == THREAD_IDX)) * A + _AXES.index(loop.thread_tag[-1])) * L + c] = 1
            elif loop.kind == PARALLEL:
                products[row + _PARALLEL * L + c] = 1
            elif loop.kind == VTHREAD:
                products[row + _VTHREAD * L + c] = 1
            if loop.kind not in _INNER_KINDS:
                continue
            products[row + _INNER * L + c] = 1
            saxis = loop.key in stmt.write.loop_keys
            if saxis:
                products[row + _SAXIS * L + c] = 1
            for b, access in enumerate(accessed):
                if loop.key in access.loop_keys:
                    per_buffer[((r * 2 + 1) * B + b) * L + c] = 1
                    if saxis:
                        per_buffer[(r * 2 * B + b) * L + c] = 1

    def as_bool(cells: bytearray, *shape: int) -> np.ndarray:
        return np.frombuffer(cells, dtype=bool).reshape(shape)

    return SymbolTerms(as_bool(products, n, 5, L), as_bool(per_buffer, n, 2, B, L), as_bool(launch, n, 2, A, L),
                       as_bool(touched, n, B), np.array([s.float_ops for s in stmts], dtype=np.float64),
                       np.array([s.guard_ops for s in stmts], dtype=np.float64),
                       np.array([s.is_copy for s in stmts], dtype=bool),
                       np.array([s.write.scope.startswith("shared") for s in stmts], dtype=bool),
                       np.array([s.write.elem_bytes for s in stmts], dtype=np.float64),
                       as_bool(deeper, n, L, L), np.array([s.reads_itself for s in stmts], dtype=bool))


def unindexed_columns(terms: SymbolTerms) -> int:
    """Bit c set: in some row, loop c is one of the row's inner loops and indexes none of its
    buffers. Where such a loop has extent 1, a walk cannot tell whether it never indexes them or
    dropped out of the indices (a stage computed at it is bound without it). A loop of extent 1
    that does index a buffer of a row kept its place in that block's bindings, which are simplified
    all at once, so in that row it indexes what it indexes at any extent."""
    mask = (terms.products[:, _INNER] & ~terms.per_buffer[:, 1].any(axis=1)).any(axis=0)
    return sum(1 << int(c) for c in np.flatnonzero(mask))


def with_index_columns(terms: SymbolTerms, other: SymbolTerms, columns: np.ndarray) -> SymbolTerms:
    """`terms`, with which buffers the loops in `columns` ([L] bool) index taken from `other`: the
    same statements walked in another program (where those loops index what they index in general,
    while in the first they had extent 1 and dropped out of the indices)."""
    products, per_buffer = terms.products.copy(), terms.per_buffer.copy()
    products[:, _SAXIS, columns] = other.products[:, _SAXIS, columns]
    per_buffer[..., columns] = other.per_buffer[..., columns]
    return replace(terms, products=products, per_buffer=per_buffer)


class TermBank:
    """The rows of many SymbolTerms in one table per field, padded to the largest loop and buffer
    counts added so far, so that the rows of a population (each program its template's rows) are
    gathered with one index per field, however many templates it mixes."""

    def __init__(self) -> None:
        self.tables: dict[str, np.ndarray] = {}
        self.used = 0

    def add(self, terms: SymbolTerms) -> tuple[int, int]:
        """Stores terms' rows; returns (first row, row count)."""
        n = len(terms.float_ops)
        for f in fields(SymbolTerms):
            new = getattr(terms, f.name)
            table = self.tables.get(f.name)
            if table is None:
                table = np.zeros((0,) + new.shape[1:], dtype=new.dtype)
            length = len(table) if self.used + n <= len(table) else 2 * (self.used + n)
            shape = (length,) + tuple(np.maximum(table.shape[1:], new.shape[1:]))
            if shape != table.shape:  # capacity doubles: appends stay cheap over a tuning run
                grown = np.zeros(shape, dtype=table.dtype)
                grown[(slice(0, len(table)),) + tuple(slice(0, d) for d in table.shape[1:])] = table
                self.tables[f.name] = table = grown
            table[(slice(self.used, self.used + n),) + tuple(slice(0, d) for d in new.shape[1:])] = new
        self.used += n
        return self.used - n, n

    def rows(self, starts: np.ndarray, counts: np.ndarray) -> SymbolTerms:
        """The rows starts[j]..starts[j]+counts[j]-1 of each j, one block after the other."""
        offsets = np.cumsum(counts) - counts
        index = np.repeat(starts - offsets, counts) + np.arange(int(counts.sum()))
        return SymbolTerms(*(self.tables[f.name][index] for f in fields(SymbolTerms)))


def evaluate_terms(terms: SymbolTerms, extents: np.ndarray, is_gpu: bool) -> PsaSymbols:
    """The symbols of statement rows given the extents of their loops: extents[r, l] is the extent
    of loop column l for row r (each row with its program's extents)."""
    e = extents[:, None, :]
    p = np.where(terms.products, e, 1.0).prod(axis=-1)
    per_buffer = (np.where(terms.per_buffer, e[:, None], 1.0).prod(axis=-1) * terms.buffers[:, None]).sum(axis=-1)
    per_axis = np.where(terms.launch, e[:, None], 1.0).max(axis=-1).prod(axis=-1)  # [rows, 2]
    grid = per_axis[:, 0] if is_gpu else p[:, _PARALLEL]
    block = per_axis[:, 1]
    inner, f_t = p[:, _INNER], p[:, _INNER] * terms.float_ops
    reg_usage, mem_workload = per_buffer[:, 0], per_buffer[:, 1]
    shared_footprint = np.where(terms.copy & terms.into_shared, p[:, _SAXIS] * block, 0.0)
    dram = np.where(terms.copy, np.where(terms.into_shared, shared_footprint * grid, inner * grid * block), 0.0)
    values = np.stack([f_t, f_t * grid * block, reg_usage, mem_workload, shared_footprint, dram,
                       1.0 + f_t / mem_workload, np.full(len(f_t), float(is_gpu)), grid, block, p[:, _VTHREAD]], axis=1)
    accumulators, accumulator_vector = register_tile(terms, extents)
    return PsaSymbols(values, terms.elem_bytes, p[:, _VECTOR], inner * terms.guard_ops, accumulators,
                      accumulator_vector)


def register_tile(terms: SymbolTerms, extents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PsaSymbols.accumulators and accumulator_vector of the rows: the written buffer's elements that
    the inner loops inside the innermost inner reduction loop longer than 1 index (a loop that
    indexes no written element, taken to be a reduction loop, repeats the update of the same
    elements; an extent-1 loop repeats nothing)."""
    saxis = terms.products[:, _SAXIS]
    reduction = terms.products[:, _INNER] & ~saxis & (extents > 1)
    tile = saxis & ~(terms.deeper & reduction[:, None, :]).any(axis=-1)
    accumulating = terms.accumulates & reduction.any(axis=-1)
    accumulators = np.where(accumulating, np.where(tile, extents, 1.0).prod(axis=-1), 0.0)
    vector = np.where(tile & terms.products[:, _VECTOR], extents, 1.0).prod(axis=-1)
    return accumulators, vector


def _own_loops(stmts: tuple[Statement, ...]) -> dict[int, Loop]:
    loops: dict[int, Loop] = {}
    for s in stmts:
        for loop in s.loops:
            loops.setdefault(loop.key, loop)
    return loops


def psa_symbols(stmts: tuple[Statement, ...], is_gpu: bool) -> PsaSymbols:
    loops = _own_loops(stmts)
    terms = symbol_terms(stmts, {key: c for c, key in enumerate(loops)})
    extents = np.array([l.extent for l in loops.values()], dtype=np.float64)
    return evaluate_terms(terms, np.broadcast_to(extents, (len(stmts), len(extents))), is_gpu)
