"""Features of real scheduled TIR: hand-scheduled TE computes (symbols checked against hand-computed
values) and real MetaSchedule CUDA programs from ../shared/h200-ms."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import tvm_ffi
from tvm import s_tir, te, topi

from pruner_offline.features import (DATAFLOW_COLUMNS, DATAFLOW_TOKENS, EXTRACTABLE_SCHEMAS, FEATURE_SCHEMA_VERSION,
                                     OP_TAGS, STATEMENT_COLUMNS, SYMBOL_COLUMNS, DeviceConstants, get_device)
from pruner_offline.features.extract import featurize_prim_func
from pruner_offline.devices import DEVICES, device_from_json, device_to_json
from pruner_offline.features.symbols import psa_symbols
from pruner_offline.features.tir_walk import walk

REPO = Path(__file__).resolve().parents[1]

# GEMM tile of the shared-memory schedule below.
M = N = K = 256
TILE_M, TILE_N = 4, 2  # per-thread register tile
THREADS_Y, THREADS_X = 8, 16
K_TILE = 16


def _sym(features, row: int, name: str) -> float:
    return float(features.symbols[row, SYMBOL_COLUMNS.index(name)])


def _row_of(features, op_tag: str) -> int:
    tags = features.statements[:, len(STATEMENT_COLUMNS) - len(OP_TAGS):]
    rows = np.flatnonzero(tags[:, OP_TAGS.index(op_tag)])
    assert len(rows) == 1, (op_tag, tags)
    return int(rows[0])


def _matmul():
    a = te.placeholder((M, K), name="A")
    b = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    c = te.compute((M, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="matmul")
    return te.create_prim_func([a, b, c])


def _bind_cooperative_fetch(sch, block, threads: int) -> None:
    fused = sch.fuse(*sch.get_loops(block)[-2:])
    _, inner = sch.split(fused, [None, threads])
    sch.bind(inner, "threadIdx.x")


def gemm_shared_gpu():
    """Classic tiled GEMM: blockIdx over output tiles, threadIdx over a TILE_M x TILE_N register tile
    each, A and B staged through shared memory per K_TILE step, accumulator in registers."""
    sch = s_tir.Schedule(_matmul())
    blk = sch.get_sblock("matmul")
    i, j, k = sch.get_loops(blk)
    i0, i1, i2 = sch.split(i, [None, THREADS_Y, TILE_M])
    j0, j1, j2 = sch.split(j, [None, THREADS_X, TILE_N])
    k0, k1 = sch.split(k, [None, K_TILE])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    local = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(local, tx)
    for buffer_index in (0, 1):
        shared = sch.cache_read(blk, buffer_index, "shared")
        sch.compute_at(shared, k0)
        _bind_cooperative_fetch(sch, shared, THREADS_Y * THREADS_X)
    sch.decompose_reduction(blk, k0)
    return sch.mod["main"]


def gemm_naive_gpu(threads: bool = True):
    """One output element per thread straight from global memory; threads=False runs it all in one
    thread of one block."""
    sch = s_tir.Schedule(_matmul())
    i, j, _ = sch.get_loops(sch.get_sblock("matmul"))
    if threads:
        sch.bind(i, "blockIdx.x")
        sch.bind(j, "threadIdx.x")
    else:
        fused = sch.fuse(i, j)
        outer, _ = sch.split(fused, [1, None])
        sch.bind(outer, "blockIdx.x")
    return sch.mod["main"]


def gemm_cpu(optimized: bool):
    sch = s_tir.Schedule(_matmul())
    blk = sch.get_sblock("matmul")
    if optimized:
        i, j, k = sch.get_loops(blk)
        j0, j1 = sch.split(j, [None, 16])
        sch.reorder(i, j0, k, j1)
        sch.parallel(i)
        sch.vectorize(j1)
    return sch.mod["main"]


def conv2d_cpu():
    data = te.placeholder((1, 16, 14, 14), name="data")
    weight = te.placeholder((32, 16, 3, 3), name="weight")
    out = topi.nn.conv2d_nchw(data, weight, stride=1, padding=1, dilation=1)
    sch = s_tir.Schedule(te.create_prim_func([data, weight, out]))
    blk = sch.get_sblock(out.op.name)
    n, f, y, x, *_ = sch.get_loops(blk)
    sch.parallel(sch.fuse(n, f))
    return sch.mod["main"]


def test_schema_constants():
    assert FEATURE_SCHEMA_VERSION >= 1
    assert (len(STATEMENT_COLUMNS), len(DATAFLOW_TOKENS), len(DATAFLOW_COLUMNS), len(SYMBOL_COLUMNS)) == (
        174, 8, 23, 11)
    assert len(set(STATEMENT_COLUMNS)) == 174


def test_gemm_tile_symbols_match_hand_computed_values():
    feats = featurize_prim_func(gemm_shared_gpu(), "cuda", device="a100")
    assert feats.statements.shape == (4, 174) and feats.symbols.shape == (4, 11)
    row = _row_of(feats, "matmul")
    grid = (M // (THREADS_Y * TILE_M)) * (N // (THREADS_X * TILE_N))
    block = THREADS_Y * THREADS_X
    f_t = 2 * K * TILE_M * TILE_N  # a multiply and an add per innermost iteration
    assert _sym(feats, row, "grid") == grid
    assert _sym(feats, row, "block") == block
    assert _sym(feats, row, "F_t") == f_t
    assert _sym(feats, row, "F") == f_t * grid * block == 2 * M * N * K
    assert _sym(feats, row, "RegUsage") == TILE_M * TILE_N + TILE_M + TILE_N
    mem = TILE_M * TILE_N + TILE_M * K + K * TILE_N
    assert _sym(feats, row, "MemWorkload") == mem
    assert _sym(feats, row, "DataReusePenalty") == pytest.approx(1 + f_t / mem)
    assert _sym(feats, row, "is_gpu") == 1 and _sym(feats, row, "vthread") == 1
    assert _sym(feats, row, "DRAM_workload") == 0  # a compute statement moves no DRAM data itself


def test_shared_copy_symbols_count_global_traffic():
    feats = featurize_prim_func(gemm_shared_gpu(), "cuda")
    grid = (M // (THREADS_Y * TILE_M)) * (N // (THREADS_X * TILE_N))
    block = THREADS_Y * THREADS_X
    copies = [r for r in range(len(feats.symbols)) if _sym(feats, r, "SharedMemFootprint") > 0]
    assert len(copies) == 2
    # Each block stages its A panel (THREADS_Y*TILE_M x K) and B panel (K x THREADS_X*TILE_N).
    expected = sorted([THREADS_Y * TILE_M * K, K * THREADS_X * TILE_N])
    footprints = sorted(_sym(feats, r, "SharedMemFootprint") for r in copies)
    assert footprints == expected
    assert all(_sym(feats, r, "SharedMemFootprint") % block == 0 for r in copies)
    for r in copies:
        assert _sym(feats, r, "DRAM_workload") == _sym(feats, r, "SharedMemFootprint") * grid


def test_dataflow_chain_found_for_shared_gemm_and_absent_for_naive():
    shared = featurize_prim_func(gemm_shared_gpu(), "cuda").dataflow
    assert shared.shape == (8, 23) and shared.dtype == np.float32
    level = {name: DATAFLOW_COLUMNS.index(f"level_{name}") for name in ("global", "shared", "local")}
    expected_levels = ["local", "global", "shared", "global", "shared", "shared", "shared", "local"]
    for token, lvl in zip(DATAFLOW_TOKENS, expected_levels):
        assert shared[DATAFLOW_TOKENS.index(token), level[lvl]] == 1.0, token
    assert np.all(shared.any(axis=1))
    # The access dims are the per-store features' own buffer-access slots, not a recomputation.
    feats = featurize_prim_func(gemm_shared_gpu(), "cuda")
    first = STATEMENT_COLUMNS.index("buf0_acc_read")
    slots = feats.statements[:, first:first + 5 * 18].reshape(-1, 18)
    access = slice(DATAFLOW_COLUMNS.index("acc_read"), DATAFLOW_COLUMNS.index("stride") + 1)
    for token in DATAFLOW_TOKENS[1:]:
        vector = shared[DATAFLOW_TOKENS.index(token), access]
        assert any(np.array_equal(vector, slot) for slot in slots), token
    naive = featurize_prim_func(gemm_naive_gpu(), "cuda").dataflow
    assert naive.shape == (8, 23) and not naive.any()


def test_analytic_score_prefers_faster_by_construction_schedules():
    for device in ("k80", "t4", "v100", "a100", "h100", "h200"):
        many_threads = featurize_prim_func(gemm_naive_gpu(True), "cuda", device=device).draft_score
        one_thread = featurize_prim_func(gemm_naive_gpu(False), "cuda", device=device).draft_score
        assert many_threads > 10 * one_thread, device
    fast = featurize_prim_func(gemm_cpu(True), "llvm").draft_score
    slow = featurize_prim_func(gemm_cpu(False), "llvm").draft_score
    assert fast > 10 * slow


def gemm_cpu_tiled(order: str, tile_i: int = 8, tile_j: int = 32, k_inner: int = 4):
    """A parallel GEMM whose chunk loops are i1 (tile_i rows), j1 (tile_j columns, vectorized) and
    the reduction k0, k1 (k_inner), nested in ``order`` (their names joined by spaces)."""
    sch = s_tir.Schedule(_matmul())
    blk = sch.get_sblock("matmul")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, tile_i])
    j0, j1 = sch.split(j, [None, tile_j])
    k0, k1 = sch.split(k, [None, k_inner])
    loops = {"i1": i1, "j1": j1, "k0": k0, "k1": k1}
    sch.reorder(i0, j0, *(loops[name] for name in order.split()))
    sch.parallel(sch.fuse(i0, j0))
    sch.vectorize(j1)
    return sch.mod["main"]


def _update_row(func) -> tuple[float, float]:
    """(accumulators, accumulator_vector) of the GEMM's update statement."""
    rows = walk(func).rows
    sym = psa_symbols(rows, False)
    r = next(n for n, row in enumerate(rows) if row.reads_itself)
    return sym.accumulators[r], sym.accumulator_vector[r]


def test_the_register_tile_is_what_the_innermost_reduction_loop_updates():
    # i1 x j1 updated at every k1 iteration: 8 x 32 accumulators, 32 of them along the vector
    assert _update_row(gemm_cpu_tiled("k0 k1 i1 j1")) == (256, 32)
    assert _update_row(gemm_cpu_tiled("k0 i1 k1 j1")) == (32, 32)  # only j1 lies inside k1
    # an innermost reduction loop of extent 1 repeats nothing: k0 is the one the tile lives in
    assert _update_row(gemm_cpu_tiled("k0 i1 j1 k1", k_inner=1)) == (256, 32)
    assert _update_row(gemm_cpu_tiled("k0 i1 j1 k1")) == (1, 1)  # j1 vectorized outside k1: one element
    add = walk(conv2d_cpu()).rows  # a statement that does not accumulate has no tile
    assert psa_symbols(tuple(r for r in add if not r.reads_itself), False).accumulators.tolist() == \
        [0.0] * sum(not r.reads_itself for r in add)


def test_a_register_tile_beyond_the_simd_registers_is_charged():
    dev = get_device("epyc-2vcpu")  # AVX2: 16 registers of 8 float32
    no_term = replace(dev, vector_registers=0)

    def score(func, d):
        return featurize_prim_func(func, "llvm", device=d).draft_score

    fits, spills = gemm_cpu_tiled("k0 k1 i1 j1", tile_i=4, tile_j=16), gemm_cpu_tiled("k0 k1 i1 j1", tile_i=16)
    assert score(fits, dev) == score(fits, no_term)  # 4 x 2 registers
    # 16 x 4 = 64 registers, 3/4 spilled: compute time x (1 + 2 * 3/4), which is what bounds it here
    assert score(spills, no_term) / score(spills, dev) == pytest.approx(2.5, rel=0.02)
    assert score(fits, dev) > score(spills, dev)
    assert score(fits, no_term) < score(spills, no_term)  # what the term corrects: bigger tiles scored faster
    # constants recorded before the term existed keep the score they were made with
    assert device_from_json({k: v for k, v in device_to_json(dev).items() if k != "vector_registers"}) == no_term


def test_device_constants_by_name_or_explicit():
    h200, h100 = get_device("H200"), get_device("h100")
    assert h200.num_units == 132 and h200.bandwidth_gbs > h100.bandwidth_gbs
    assert {"k80", "t4", "v100", "a100", "h100", "h200"} <= set(DEVICES)
    custom = DeviceConstants("half-h200", True, h200.peak_gflops / 2, h200.bandwidth_gbs / 2, 66)
    func = gemm_shared_gpu()
    full = featurize_prim_func(func, "cuda", device=h200).draft_score
    half = featurize_prim_func(func, "cuda", device=custom).draft_score
    assert half < full
    with pytest.raises(ValueError, match="unknown device"):
        get_device("nope")
    with pytest.raises(ValueError):
        featurize_prim_func(func, "cuda", device="epyc-7452")


def test_cpu_conv2d_features_and_op_tags():
    feats = featurize_prim_func(conv2d_cpu(), "llvm")
    n = feats.statements.shape[0]
    assert n == 2 and feats.symbols.shape == (2, 11)
    tags = feats.statements[:, -len(OP_TAGS):]
    assert tags.sum(axis=1).tolist() == [1.0, 1.0]
    assert tags[0, OP_TAGS.index("injective")] == 1 and tags[1, OP_TAGS.index("conv")] == 1
    conv = 1
    assert _sym(feats, conv, "is_gpu") == 0
    assert _sym(feats, conv, "grid") == 32  # the fused parallel loop plays the grid's role on CPU
    assert _sym(feats, conv, "F") == 2 * 32 * 14 * 14 * 16 * 3 * 3
    assert not feats.dataflow.any()
    assert np.isfinite(feats.draft_score) and feats.draft_score > 0


def test_cpu_score_charges_the_bounds_tests_of_inlined_padding():
    """Padding inlined into a convolution tests its bounds once per multiply-add; the CPU draft
    charges those tests (4 comparisons and 3 ands per load here) where the padding stage is gone."""
    from pruner_offline.features.draft_score import statement_times
    from pruner_offline.features.symbols import psa_symbols
    from pruner_offline.features.tir_walk import walk
    from pruner_offline.tuning.frontends.workloads import named_workload

    sch = s_tir.Schedule(named_workload("depthwise"))
    separate = walk(sch.mod["main"]).rows
    sch.compute_inline(sch.get_sblock("pad"))
    inlined = walk(sch.mod["main"]).rows
    assert [(s.block, s.guard_ops) for s in separate] == [("pad", 7), ("depthwise_conv2d_nchw", 0)]
    assert [(s.block, s.guard_ops) for s in inlined] == [("depthwise_conv2d_nchw", 7)]
    dev = get_device("epyc-7452")
    sym = psa_symbols(inlined, False)
    assert sym.guard_work[0] == 7 * sym.column("F_t")[0] / inlined[0].float_ops
    charged = statement_times(sym, dev)[0]
    free = statement_times(replace(sym, guard_work=np.zeros(1)), dev)[0]
    conv_alone = statement_times(psa_symbols(separate, False), dev)[1]
    assert free == pytest.approx(conv_alone)  # the same loops and arithmetic
    assert charged > 3 * free  # 2 float ops and 7 tests per multiply-add, the compute bound


def _first_line_of_each_workload(db: Path) -> list[int]:
    seen: dict[int, int] = {}
    for i, line in enumerate((db / "database_tuning_record.json").read_text().splitlines()):
        seen.setdefault(json.loads(line)[0], i)
    return sorted(seen.values())


@pytest.fixture(scope="module")
def h200_programs(h200_ms):
    spec = importlib.util.spec_from_file_location("draft_score_h200", REPO / "bench" / "draft_score_h200.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    lines = _first_line_of_each_workload(h200_ms)
    programs = bench.load_h200_programs(h200_ms, lines)
    assert len(programs) == len(lines)  # every program of the database is scheduled
    return programs


def test_h200_ms_programs_featurize(h200_programs):
    assert len(h200_programs) >= 4
    with_chain = 0
    for program in h200_programs:
        feats = featurize_prim_func(program.func, "cuda", device="h200")
        n = feats.statements.shape[0]
        assert n >= 2 and feats.statements.shape == (n, 174) and feats.symbols.shape == (n, 11)
        assert feats.dataflow.shape == (8, 23)
        for arr in (feats.statements, feats.symbols, feats.dataflow):
            assert arr.dtype == np.float32 and np.isfinite(arr).all()
        assert feats.symbols[:, SYMBOL_COLUMNS.index("is_gpu")].min() == 1
        assert np.isfinite(feats.draft_score) and feats.draft_score > 0
        with_chain += bool(feats.dataflow.any())
    # MetaSchedule's CUDA space stages both operands through shared memory.
    assert with_chain == len(h200_programs)


def test_featurize_is_pure():
    func = gemm_shared_gpu()
    a = featurize_prim_func(func, "cuda")
    featurize_prim_func(gemm_cpu(True), "llvm")
    b = featurize_prim_func(func, "cuda")
    for x, y in ((a.statements, b.statements), (a.symbols, b.symbols), (a.dataflow, b.dataflow)):
        np.testing.assert_array_equal(x, y)
    assert a.draft_score == b.draft_score
    assert tvm_ffi.structural_equal(func, gemm_shared_gpu())


@pytest.mark.parametrize("schema, rows", [(2, 2), (3, 1)])
def test_cross_thread_reduction_rows_align_with_per_store_features(schema, rows):
    # Binding a reduction loop to threadIdx makes PerStoreFeature's preprocessing (schema 2) add a
    # statement (the cross-thread result) that the scheduled TIR does not have yet; the walk then
    # reads the program as lowered. Schema 3's extractor reads the TIR as scheduled: one statement.
    a = te.placeholder((128, 256), name="A")
    k = te.reduce_axis((0, 256), name="k")
    rowsum = te.compute((128,), lambda i: te.sum(a[i, k] * 2.0, axis=k), name="rowsum")
    sch = s_tir.Schedule(te.create_prim_func([a, rowsum]))
    i, kk = sch.get_loops(sch.get_sblock("rowsum"))
    _, k1 = sch.split(kk, [None, 32])
    sch.bind(i, "blockIdx.x")
    sch.bind(k1, "threadIdx.x")
    feats = featurize_prim_func(sch.mod["main"], "cuda", schema=schema)
    assert feats.statements.shape == (rows, 174) and feats.symbols.shape == (rows, 11)
    assert _sym(feats, 0, "F_t") == 2 * 256 // 32  # each thread reduces 8 elements
    assert _sym(feats, 0, "block") == 32 and _sym(feats, 0, "grid") == 128


def test_schedule_input_gives_the_same_features_as_its_prim_func():
    func = gemm_shared_gpu()
    from_func = featurize_prim_func(func, "cuda")
    from_schedule = featurize_prim_func(s_tir.Schedule(func), "cuda")
    np.testing.assert_array_equal(from_func.statements, from_schedule.statements)
    assert from_func.draft_score == from_schedule.draft_score


def test_featurizing_real_programs_never_imports_tensor_intrin(h200_ms):
    # tvm.s_tir.tensor_intrin costs ~20-30 s to import; a fresh interpreter shows whether the
    # featurizer (TuneContext included) or trace application pulls it in.
    script = (
        "import sys, importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('b', {str(REPO / 'bench' / 'draft_score_h200.py')!r})\n"
        "b = importlib.util.module_from_spec(spec); sys.modules['b'] = b; spec.loader.exec_module(b)\n"
        "from pruner_offline.features.extract import featurize_prim_func\n"
        f"p = b.load_h200_programs(b.Path({str(h200_ms)!r}), [0])[0]\n"
        "featurize_prim_func(p.func, 'cuda')\n"
        "print('tvm.s_tir.tensor_intrin' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_op_tags_of_topi_depthwise_and_dense_bias_relu():
    data = te.placeholder((1, 8, 14, 14), name="data")
    kernel = te.placeholder((8, 1, 3, 3), name="kernel")
    dw = topi.nn.depthwise_conv2d_nchw(data, kernel, 1, 1, 1)
    x = te.placeholder((4, 16), name="x")
    w = te.placeholder((8, 16), name="w")
    bias = te.placeholder((8,), name="bias")
    fused = topi.nn.relu(topi.add(topi.nn.dense(x, w), bias))
    for tensors, expected in (([data, kernel, dw], ["injective", "depthwise"]),
                              ([x, w, bias, fused], ["matmul", "elementwise", "elementwise"])):
        feats = featurize_prim_func(te.create_prim_func(tensors), "llvm")
        tags = feats.statements[:, -len(OP_TAGS):]
        assert [OP_TAGS[i] for i in tags.argmax(axis=1)] == expected


@pytest.mark.parametrize("schema", EXTRACTABLE_SCHEMAS)
def test_featurize_many_is_featurize_one_by_one_and_a_bad_program_fails_alone(monkeypatch, schema):
    """The per-store part of a batch is one native call; when it fails (a program the extractor
    cannot read), every program is extracted alone, so the others keep their features and the bad
    one reports its own error."""
    from pruner_offline.features import extract

    programs = [gemm_cpu(True), conv2d_cpu(), gemm_cpu(False)]
    alone = [featurize_prim_func(p, "llvm", schema=schema) for p in programs]
    assert {a.schema_version for a in alone} == {schema}
    batched = extract.featurize_many(programs, "llvm", schema=schema)
    for a, b in zip(alone, batched):
        np.testing.assert_array_equal(a.statements, b.statements)
        np.testing.assert_array_equal(a.symbols, b.symbols)
        assert a.draft_score == b.draft_score

    real = extract.per_store_of_many
    bad = programs[1]

    def unreadable(schedules, *args):
        if any(tvm_ffi.structural_equal(s.mod["main"], bad) for s in schedules):
            raise RuntimeError("the extractor cannot read this program")
        return real(schedules, *args)

    monkeypatch.setattr(extract, "per_store_of_many", unreadable)
    got = extract.featurize_many(programs, "llvm", schema=schema)
    assert isinstance(got[1], RuntimeError) and "cannot read" in str(got[1])
    for i in (0, 2):
        np.testing.assert_array_equal(got[i].statements, alone[i].statements)
