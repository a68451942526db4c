"""The temporal dataflow pattern: 8 access vectors x 23 dims along the GPU chain
"local init -> global->shared copies -> compute reading shared" (docs/features.md §4).

Locating the chain, in the statement order the per-store rows use:
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
"""

from __future__ import annotations

from math import ceil, prod

import numpy as np

from .schema import (ALLOC_SIZE_COLUMN, BUFFER_ACCESS_COLUMNS, BUFFER_GROUP_START,
                     BUFFERS_PER_STORE, DATAFLOW_COLUMNS, DATAFLOW_TOKENS, MEMORY_LEVELS)
from .symbols import PsaSymbols
from .tir_walk import Access, WalkResult

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


def dataflow_pattern(walked: WalkResult, per_store: np.ndarray, symbols: PsaSymbols) -> np.ndarray:
    """[8, 23] float32; zeros where the chain (or one of its tokens) is absent."""
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
    writer_alloc = {s.write.name: per_store[i, ALLOC_SIZE_COLUMN] for i, s in enumerate(rows)}

    def alloc(access: Access) -> float:
        return writer_alloc.get(access.name, _slog(access.numel * access.elem_bytes))

    init = next((s for s in walked.inits if s.write.name == stmt.write.name), None)
    if init is not None:
        n_bytes = prod(l.extent for l in init.loops) * init.write.elem_bytes
        n_lines = ceil(n_bytes / _CACHE_LINE)
        access = np.zeros(_N_ACCESS)
        for name, value in (("acc_write", 1.0), ("bytes", _slog(n_bytes)),
                            ("unique_bytes", _slog(n_bytes)), ("lines", _slog(n_lines)),
                            ("unique_lines", _slog(n_lines)), ("reuse_none", 1.0)):
            access[BUFFER_ACCESS_COLUMNS.index(name)] = value
        out[0] = _vector(0.0, _level(init.write.scope), access, alloc(init.write))

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
