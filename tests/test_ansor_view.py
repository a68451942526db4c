"""The Ansor view of a scheduled program and the per-level regions computed on it."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import s_tir, te, tirx  # noqa: E402

from pruner_offline.features.ansor_view import ansor_view  # noqa: E402
from pruner_offline.features.per_store import _extract, per_store_features  # noqa: E402
from pruner_offline.features.regions import access_columns  # noqa: E402
from pruner_offline.features.schema import BUFFER_GROUP_START, PER_STORE_COLUMNS  # noqa: E402

UNIQUE_BYTES = PER_STORE_COLUMNS.index("buf0_unique_bytes") - BUFFER_GROUP_START


def _loops(stmt, out: list, bound: tuple = ()) -> list:
    """(loop, thread tags of the enclosing loops) of every loop under ``stmt``."""
    if isinstance(stmt, tirx.For):
        out.append((stmt, bound))
        tag = stmt.thread_binding.thread_tag if stmt.thread_binding is not None else None
        _loops(stmt.body, out, bound + ((tag,) if tag else ()))
    elif isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _loops(s, out, bound)
    elif isinstance(stmt, s_tir.SBlockRealize):
        _loops(stmt.block.body, out, bound)
    return out


def _fetch_kernel() -> tirx.PrimFunc:
    """C = A + 1 through a shared copy whose fetch re-binds threadIdx.x, with an unroll pragma on
    a unit loop: the three things the view changes."""
    a = te.placeholder((64, 64), "float32", "A")
    c = te.compute((64, 64), lambda i, j: a[i, j] + tirx.FloatImm("float32", 1.0), name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, c]))
    block = sch.get_sblock("C")
    shared = sch.cache_read(block, 0, "shared")
    i, j = sch.get_loops(block)
    bx, tx, inner = sch.split(sch.fuse(i, j), [16, 64, 4])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.compute_at(shared, tx)
    fetch = sch.fuse(*sch.get_loops(shared)[2:])
    _, ftx = sch.split(fetch, [None, 64])
    sch.bind(ftx, "threadIdx.x")
    sch.annotate(sch.add_unit_loop(inner), "pragma_auto_unroll_max_step", 16)
    return sch.mod["main"]


def test_view_keeps_the_tensor_counts_each_thread_binding_and_drops_unit_pragma_loops():
    func = _fetch_kernel()
    view = ansor_view(func)
    assert len(view.body.block.alloc_buffers) == 0
    assert [p.name for p in view.params] == ["A", "C", "A_shared"]
    pragma_extents = []
    for loop, enclosing in _loops(view.body, []):
        tag = loop.thread_binding.thread_tag if loop.thread_binding is not None else None
        assert tag is None or tag not in enclosing, "a thread binding nested in its own tag"
        if "pragma_auto_unroll_max_step" in loop.annotations:
            pragma_extents.append(int(loop.extent))
    assert pragma_extents == [4]
    outer = PER_STORE_COLUMNS.index("outer_prod")
    plain, ansor = per_store_features(func, "cuda"), per_store_features(func, "cuda", ansor=True)
    # Ansor counts the fetch's 64 threads inside the kernel's 64 threads once more
    runs = np.exp2(plain[:, outer].astype(np.float64)) - 1
    expect = np.log2(np.sort(runs) * [1, 64] + 1)
    np.testing.assert_allclose(np.sort(ansor[:, outer]), expect, atol=1e-3)


def test_regions_bound_a_floormod_of_a_fused_loop_over_its_range():
    # a fused loop over a 16 x 14 copy indexes through fused // 14 and fused % 14; the write
    # touches all 224 elements, PerStoreFeature's own analyzer says 16
    a = te.placeholder((16, 14), "float32", "A")
    b = te.compute((16, 14), lambda i, j: a[i, j] * tirx.FloatImm("float32", 2.0), name="B")
    sch = s_tir.Schedule(te.create_prim_func([a, b]))
    sch.parallel(sch.fuse(*sch.get_loops(sch.get_sblock("B"))))
    func = sch.mod["main"]
    ours = access_columns(func, np.array([224.0]))[0]
    theirs = _extract(func, "llvm")[0, BUFFER_GROUP_START:]
    assert ours[UNIQUE_BYTES] == pytest.approx(np.log2(224 * 4 + 1), abs=1e-4)
    assert theirs[UNIQUE_BYTES] == pytest.approx(np.log2(16 * 4 + 1), abs=1e-4)
