"""The temporal dataflow pattern: 8 access vectors x 23 dims (docs/features.md §4).

GPU programs: the chain "local init -> global->shared copies -> compute reading shared", located in
the statement order the per-store rows use:
- compute: the first statement that writes a local buffer and reads a shared one;
- copies: up to two earlier statements that store into a shared buffer the compute reads, in order;
- init: the constant store that initialises the compute's local buffer.
No compute statement or no copy means no pattern: the tensor is all zeros.

Tokens (DATAFLOW_TOKENS): init write, copy0 global read, copy0 shared write, copy1 global read,
copy1 shared write, compute's first and second read, compute's read-write of its accumulator.

Each vector: [float_ops, level one-hot (global, shared, local), the 18 buffer-access features,
alloc_size]. The 18 are copied from the statement's per-store row (the buffer-access slot with the
matching access type), so they carry the same slog scaling; float_ops is slog(F) of the statement and
alloc_size slog(bytes) of the buffer (the compacted allocation from the writer's per-store row for
shared/local buffers, the declared size for global ones). Two exceptions, both by necessity:
- PerStoreFeature skips constant stores, so the init vector is built here: write access, bytes and
  unique bytes = slog(stores x elem bytes), lines likewise in 64-byte lines, no reuse.
- Per-store slots are sorted by touched lines, not by buffer, so when the compute reads buffers of
  different scopes the level (and alloc_size) of its read tokens is the mean over the buffers it
  reads.

CPU programs have no shared memory, so the caches play its part: the same rows describe the tiles of
the compute's operands that stay resident in a core's L2 and L1 while the loops inside them run, and
the traffic that brings them there (cpu_dataflow_pattern).
"""
from __future__ import annotations

from math import ceil, prod
from typing import Optional

import numpy as np

from .schema import (ALLOC_SIZE_COLUMN, BUFFER_ACCESS_COLUMNS, BUFFER_GROUP_START,
                     BUFFERS_PER_STORE, DATAFLOW_COLUMNS, DATAFLOW_TOKENS, MEMORY_LEVELS)
from .symbols import PsaSymbols
from .tir_walk import Access, Statement, WalkResult

_N_ACCESS = len(BUFFER_ACCESS_COLUMNS)
_READ, _WRITE, _READWRITE = (BUFFER_ACCESS_COLUMNS.index(c)
                             for c in ("acc_read", "acc_write", "acc_readwrite"))
_CACHE_LINE = 64


def _slog(x: float) -> float:
    return float(np.log2(abs(x) + 1.0))


def _level(scope: str) -> np.ndarray:
    onehot = np.zeros(len(MEMORY_LEVELS))
    for i, prefix in enumerate(MEMORY_LEVELS):
        if scope.startswith(prefix):
            onehot[i] = 1.0
    return onehot


def _slots(row: np.ndarray, access_type: int) -> list[np.ndarray]:
    groups = row[BUFFER_GROUP_START:BUFFER_GROUP_START + _N_ACCESS * BUFFERS_PER_STORE]
    groups = groups.reshape(BUFFERS_PER_STORE, _N_ACCESS)
    return [g for g in groups if g[access_type] == 1.0]


def _vector(float_ops: float, level: np.ndarray, access: np.ndarray, alloc: float) -> np.ndarray:
    return np.concatenate(([float_ops], level, access, [alloc]))


def _init_vector(walked: WalkResult, stmt: Statement, alloc) -> Optional[np.ndarray]:
    init = next((s for s in walked.inits if s.write.name == stmt.write.name), None)
    if init is None:
        return None
    n_bytes = prod(l.extent for l in init.loops) * init.write.elem_bytes
    n_lines = ceil(n_bytes / _CACHE_LINE)
    access = np.zeros(_N_ACCESS)
    for name, value in (("acc_write", 1.0), ("bytes", _slog(n_bytes)),
                        ("unique_bytes", _slog(n_bytes)), ("lines", _slog(n_lines)),
                        ("unique_lines", _slog(n_lines)), ("reuse_none", 1.0)):
        access[BUFFER_ACCESS_COLUMNS.index(name)] = value
    return _vector(0.0, _level(init.write.scope), access, alloc(init.write))


def _allocations(walked: WalkResult, per_store: np.ndarray):
    writer_alloc = {s.write.name: per_store[i, ALLOC_SIZE_COLUMN] for i, s in enumerate(walked.rows)}

    def alloc(access: Access) -> float:
        return writer_alloc.get(access.name, _slog(access.numel * access.elem_bytes))
    return alloc


def dataflow_pattern(walked: WalkResult, per_store: np.ndarray, symbols: PsaSymbols,
                     is_gpu: bool) -> np.ndarray:
    """[8, 23] float32; zeros where the chain (or one of its tokens) is absent."""
    if not is_gpu:
        return cpu_dataflow_pattern(walked, per_store, symbols)
    out = np.zeros((len(DATAFLOW_TOKENS), len(DATAFLOW_COLUMNS)), dtype=np.float32)
    rows = walked.rows
    compute = next((i for i, s in enumerate(rows) if s.write.scope.startswith("local")
                    and any(r.scope.startswith("shared") for r in s.reads)), None)
    if compute is None:
        return out
    stmt = rows[compute]
    read_names = {r.name for r in stmt.reads}
    copies = [i for i in range(compute)
              if rows[i].write.scope.startswith("shared") and rows[i].write.name in read_names][:2]
    if not copies:
        return out
    flops = symbols.column("F")
    alloc = _allocations(walked, per_store)
    init = _init_vector(walked, stmt, alloc)
    if init is not None:
        out[0] = init

    for k, i in enumerate(copies):
        copy, row = rows[i], per_store[i]
        f = _slog(flops[i])
        source = copy.reads[0]
        for slot, (access_type, buffer) in enumerate(((_READ, source), (_WRITE, copy.write))):
            found = _slots(row, access_type)
            if found:
                out[1 + 2 * k + slot] = _vector(f, _level(buffer.scope), found[0], alloc(buffer))

    f = _slog(flops[compute])
    inputs = [r for r in stmt.reads if r.name != stmt.write.name]
    read_level = np.mean([_level(r.scope) for r in inputs], axis=0)
    read_alloc = float(np.mean([alloc(r) for r in inputs]))
    for k, access in enumerate(_slots(per_store[compute], _READ)[:2]):
        out[5 + k] = _vector(f, read_level, access, read_alloc)
    accumulator = _slots(per_store[compute], _READWRITE) or _slots(per_store[compute], _WRITE)
    if accumulator:
        out[7] = _vector(f, _level(stmt.write.scope), accumulator[0], alloc(stmt.write))
    return out


# Per-core capacities the CPU tokens are cut at: nominal rather than per device (L1d is 32 KiB on the
# x86 CPUs TenSet measured, L2 256 KiB-1 MiB), so a store's features do not depend on which CPU's
# constants it was made with; (level slot the token carries, bytes).
_CPU_CACHES = (("shared", 512 * 1024), ("local", 32 * 1024))


def _footprint(stmt: Statement, access: Access, depth: int) -> int:
    """Elements of ``access`` one iteration of the loop above ``depth`` touches: the product of the
    extents of the loops inside it that index the buffer, at most the buffer (a box bound, so it
    overcounts overlapping convolution windows)."""
    return min(access.numel, prod(l.extent for l in stmt.loops[depth:] if l.key in access.loop_keys))


def _tile_bytes(stmt: Statement, buffers: list[Access], depth: int) -> int:
    return sum(_footprint(stmt, b, depth) * b.elem_bytes for b in buffers)


def _resident_depth(stmt: Statement, buffers: list[Access], capacity: int) -> int:
    """The outermost loop depth whose tile of all the statement's buffers fits in ``capacity`` bytes
    (the innermost body, one element per buffer, always does)."""
    return next(d for d in range(len(stmt.loops) + 1) if _tile_bytes(stmt, buffers, d) <= capacity)


def _log_ratio(x: float, per: float) -> float:
    return float(np.log2(max(x, 1.0) / max(per, 1.0)))


def _tile_vector(stmt: Statement, access: Access, access_type: str, depth: int, buffers: list[Access],
                 level: str, alloc: float) -> np.ndarray:
    inner = prod(l.extent for l in stmt.loops[depth:])
    tiles = prod(l.extent for l in stmt.loops[:depth])
    elems = _footprint(stmt, access, depth)
    tile = elems * access.elem_bytes
    traffic = tile * tiles
    reuse = inner / elems
    work = prod(l.extent for l in stmt.loops) * max(stmt.float_ops, 1)
    reused = any(l.extent > 1 and l.key not in access.loop_keys for l in stmt.loops[depth:])
    innermost = stmt.loops[-1] if stmt.loops else None
    lines = ceil(tile / _CACHE_LINE) * tiles
    # Whole-nest traffic is divided by the statement's float ops (signed log2: bytes per flop), so it
    # reads the same on a small and a large workload; the tile figures are bounded by the capacity.
    values = {
        access_type: 1.0,
        "bytes": _log_ratio(traffic, work), "unique_bytes": _slog(tile),
        "lines": _log_ratio(lines * _CACHE_LINE, work), "unique_lines": _slog(ceil(tile / _CACHE_LINE)),
        "reuse_loop_multiple_read" if reused else "reuse_none": 1.0,
        "reuse_dis_iter": _slog(inner), "reuse_dis_bytes": _slog(_tile_bytes(stmt, buffers, depth)),
        "reuse_ct": _slog(reuse), "unique_bytes_d_reuse_ct": _slog(tile / reuse),
        # indices carry no coefficients here: an innermost loop that indexes the buffer is taken to
        # walk it contiguously (it is the vectorized or last-dimension loop in every sketch)
        "stride": 1.0 if innermost is not None and innermost.key in access.loop_keys else 0.0,
    }
    vector = np.zeros(_N_ACCESS)
    for name, value in values.items():
        vector[BUFFER_ACCESS_COLUMNS.index(name)] = value
    onehot = np.array([float(m == level) for m in MEMORY_LEVELS])
    return _vector(_slog(inner * stmt.float_ops), onehot, vector, alloc)


def cpu_dataflow_pattern(walked: WalkResult, per_store: np.ndarray, symbols: PsaSymbols) -> np.ndarray:
    """[8, 23] float32 for a CPU program, in the rows the GPU chain uses (docs/features.md §4):
    0 the accumulator's init; 1-2 and 3-4 the compute's first and second input as tiles resident in
    L2 and in L1; 5-6 the compute's output tile in L2 and L1; 7 the compute's accumulator slot of its
    per-store row. The compute is the statement with the most float operations (PSA symbol F): its
    loop nest's tiling is what the caches see; none (only copies) means all zeros."""
    out = np.zeros((len(DATAFLOW_TOKENS), len(DATAFLOW_COLUMNS)), dtype=np.float32)
    flops = symbols.column("F")
    if not len(flops) or flops.max() <= 0:
        return out
    compute = int(np.argmax(flops))
    stmt = walked.rows[compute]
    alloc = _allocations(walked, per_store)
    init = _init_vector(walked, stmt, alloc)
    if init is not None:
        out[0] = init
    inputs = [r for r in stmt.reads if r.name != stmt.write.name][:2]
    buffers = [stmt.write, *inputs]
    output_type = "acc_readwrite" if stmt.reads_itself else "acc_write"
    for c, (level, capacity) in enumerate(_CPU_CACHES):
        depth = _resident_depth(stmt, buffers, capacity)
        for k, access in enumerate(inputs):
            out[1 + 2 * k + c] = _tile_vector(stmt, access, "acc_read", depth, buffers, level, alloc(access))
        out[5 + c] = _tile_vector(stmt, stmt.write, output_type, depth, buffers, level, alloc(stmt.write))
    accumulator = _slots(per_store[compute], _READWRITE) or _slots(per_store[compute], _WRITE)
    if accumulator:
        out[7] = _vector(_slog(flops[compute]), _level(stmt.write.scope), accumulator[0], alloc(stmt.write))
    return out
