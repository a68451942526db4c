"""The draft stage of our tuning cost model: batched analytic scores, draft inputs from templates of
loop structures (equal to the walk's, read through the loop skeleton and gathered from one term
bank), programs found again by identity, the verifier's per-population cap, and draft-then-verify
as a search strategy (PaCM sees only the survivors, spread over loop structures)."""

import gc
import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tvm import s_tir, tirx
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.runner import RunnerResult

from pruner_offline.features import get_device
from pruner_offline.features.draft_score import analytic_score, row_scores
from pruner_offline.features.draft_templates import DraftTemplates, loop_structure, loop_structures, make_template
from pruner_offline.features.native import build, compiled
from pruner_offline.features.extract import featurize_prim_func
from pruner_offline.features.symbols import PsaSymbols, TermBank, evaluate_terms, psa_symbols, unindexed_columns
from pruner_offline.features.tir_walk import skeleton, walk
from pruner_offline.targets import tuning_target
from pruner_offline.tuning.cost_model.calibration import StructureCalibration
from pruner_offline.tuning.cost_model.candidates import CandidateFeatures, features_batch
from pruner_offline.tuning.context import make_context
from pruner_offline.tuning.cost_model.pruner import PrunerCostModel
from pruner_offline.tuning.cost_model.ranking import draft_then_verify
from pruner_offline.tuning.search.sampling import sample_candidates
from pruner_offline.tuning.search.draft_verify import DraftThenVerifySearch
from pruner_offline.tuning.search.spread import capped_order
from pruner_offline.tuning.frontends.workloads import named_workload

from conftest import REPO
from test_features import _matmul, gemm_shared_gpu


@pytest.fixture(scope="module")
def space():
    return sample_candidates(named_workload("matmul-small"), 24, seed=3)


def _batched_scores(programs: list[PsaSymbols], dev) -> np.ndarray:
    """row_scores (the draft stage's one pass) over the statements of ``programs`` joined."""
    joined = PsaSymbols(np.concatenate([p.values for p in programs] or [np.zeros((0, 11))]),
                        *(np.concatenate([getattr(p, f) for p in programs] or [np.zeros(0)])
                          for f in ("elem_bytes", "vector_extent", "guard_work", "accumulators", "accumulator_vector")))
    owner = np.repeat(np.arange(len(programs)), [len(p.values) for p in programs])
    return row_scores(joined, owner, len(programs), dev)


def test_batched_scores_equal_one_program_at_a_time(space):
    symbols = [psa_symbols(walk(c.sch.mod["main"]).rows, False) for c in space[1]]
    for device in ("epyc-7452", "epyc-2vcpu", "h200"):  # both branches of the formula
        dev = get_device(device)
        batched = _batched_scores(symbols, dev)
        single = np.array([analytic_score(s, dev) for s in symbols])
        np.testing.assert_allclose(batched, single, rtol=1e-12)
        assert len(set(np.round(np.log(batched), 6))) > 5  # the candidates are told apart
    assert len(_batched_scores([], get_device("epyc-7452"))) == 0


def _assert_drafts_are_the_walks(funcs, drafts, dev):
    for func, d in zip(funcs, drafts):
        walked = psa_symbols(walk(func).rows, dev.is_gpu)
        np.testing.assert_array_equal(d.symbols, walked.values.astype(np.float32))
        assert d.draft_score == pytest.approx(analytic_score(walked, dev), rel=1e-12)


@pytest.mark.parametrize("workload, shared", [("matmul", True), ("batch-matmul", False), ("conv2d", False),
                                              ("depthwise", False)])
def test_template_symbols_are_the_walks(workload, shared):
    """Candidates of one loop structure share a template; their symbols and scores must still be
    exactly what walking each program gives. (Random candidates of the larger spaces rarely share a structure:
    their compute locations are drawn uniformly.)"""
    _, candidates = sample_candidates(named_workload(workload), 60, seed=5)
    funcs = [c.sch.mod["main"] for c in candidates]
    templates = DraftTemplates("llvm", "epyc-2vcpu")
    _assert_drafts_are_the_walks(funcs, templates.draft(funcs), get_device("epyc-2vcpu"))
    assert templates.times.failures == 0
    assert templates.times.templates < 0.8 * len(funcs) if shared else templates.times.templates <= len(funcs)


def test_one_set_of_templates_serves_several_workloads_and_populations():
    """A network's tasks share one cost model: templates of conv2d and matmul in one term bank,
    which grows when a template has more loops or buffers than those before it, drafted in
    populations that mix them and in populations met again after new templates were added."""
    funcs = {wl: [c.sch.mod["main"] for c in sample_candidates(named_workload(wl), 20, seed=9)[1]]
             for wl in ("matmul", "conv2d", "depthwise")}
    templates = DraftTemplates("llvm", "epyc-2vcpu")
    dev = get_device("epyc-2vcpu")
    first = templates.draft(funcs["matmul"])
    widths = {name: table.shape[1:] for name, table in templates.bank.tables.items()}
    mixed = [f for pair in zip(funcs["conv2d"], funcs["matmul"], funcs["depthwise"]) for f in pair]
    _assert_drafts_are_the_walks(mixed, templates.draft(mixed), dev)
    assert templates.bank.tables["per_buffer"].shape[1:] != widths["per_buffer"]  # conv2d: more loops
    again = templates.draft(funcs["matmul"])
    _assert_drafts_are_the_walks(funcs["matmul"], again, dev)
    assert [d.draft_score for d in again] == [d.draft_score for d in first]
    assert templates.times.failures == 0


def test_the_loop_skeleton_has_every_loop_the_walk_sees_in_nesting_order():
    _, candidates = sample_candidates(named_workload("conv2d"), 10, seed=2)
    for func in [c.sch.mod["main"] for c in candidates] + [gemm_shared_gpu()]:
        structure = loop_structure(func)
        column = {hash(v): i for i, v in enumerate(structure.loop_vars)}
        result = walk(func)
        for stmt in result.rows + result.inits:
            columns = [column[loop.key] for loop in stmt.loops]
            assert columns == sorted(columns)  # outer loops first, as the walk lists them
            assert [structure.extents[c] for c in columns] == [loop.extent for loop in stmt.loops]
        assert structure.unit_loops == sum(1 << i for i, e in enumerate(structure.extents) if e == 1)
        assert sum(isinstance(k, str) for k in structure.key) >= len(result.rows)  # the stores


def _written(shape: list) -> bytes:
    """skeleton's shape list as native_skeleton.cc writes it."""
    def sized(text: str) -> str:
        return f"{len(text.encode())}:{text}"
    parts = [f"F{int(p[1])},{sized(p[0])}{sized(p[2])}" if isinstance(p, tuple)
             else f"S{sized(p)}" if isinstance(p, str) else f"Q{p};" for p in shape]
    return "".join(parts).encode()


@pytest.mark.skipif(compiled() is None, reason="the native loop skeleton did not build here (no C++ compiler?)")
def test_the_native_skeleton_is_the_python_ones():
    """Per program: the key is skeleton's shape list written out, the extents, loops of extent 1
    and loop variables (the same nodes) are skeleton's; and drafts through either are the same."""
    funcs = [c.sch.mod["main"] for wl in ("matmul", "conv2d", "depthwise", "batch-matmul")
             for c in sample_candidates(named_workload(wl), 15, seed=7)[1]]
    funcs += [gemm_shared_gpu(), _tiled_matmul(1, 4)]  # thread bindings; a stage computed at a loop
    native = loop_structures(funcs)
    for func, got in zip(funcs, native):
        shape, extents, loop_vars = skeleton(func.body)
        assert got.key == _written(shape)
        assert list(got.extents) == extents
        assert got.unit_loops == loop_structure(func).unit_loops
        assert len(got.loop_vars) == len(loop_vars) and all(a.same_as(b) for a, b in zip(got.loop_vars, loop_vars))
    assert any("threadIdx" in p[2] for p in skeleton(funcs[-2].body)[0] if isinstance(p, tuple))
    assert len({s.key for s in native}) > 20  # structures told apart
    # what is not a PrimFunc (an FFI object or not) has no structure, and costs the others nothing
    first, *others = loop_structures([funcs[0], tirx.IntImm("int32", 1), SimpleNamespace()])
    assert first.key == native[0].key and others == [None, None]
    python = DraftTemplates("llvm", "epyc-2vcpu", native=False)
    for a, b in zip(DraftTemplates("llvm", "epyc-2vcpu").draft(funcs), python.draft(funcs)):
        np.testing.assert_array_equal(a.symbols, b.symbols)
        assert a.draft_score == b.draft_score


def test_native_readers_that_do_not_build_are_logged_not_raised(caplog, monkeypatch, tmp_path):
    monkeypatch.setenv("TVM_FFI_CACHE_DIR", str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="pruner_offline.features.native"):
        assert build(["this is not C++"]) is None
    assert len(caplog.records) == 1 and "native TIR readers not built" in caplog.text


def test_the_term_bank_gathers_each_programs_rows_padded():
    funcs = [c.sch.mod["main"] for wl in ("matmul", "conv2d")
             for c in sample_candidates(named_workload(wl), 2, seed=4)[1]]
    terms = [make_template(f, loop_structure(f)) for f in funcs]
    extents = [np.array(loop_structure(f).extents, dtype=float) for f in funcs]
    bank = TermBank()
    rows = [bank.add(t) for t in terms]  # conv2d's come later, with more loops: the tables widen
    order = [3, 0, 2, 0, 1]
    gathered = bank.rows(np.array([rows[i][0] for i in order]), np.array([rows[i][1] for i in order]))
    width = gathered.products.shape[-1]
    row_extents, expected, end = [], [], 0
    for i in order:
        n = len(terms[i].float_ops)
        for name in ("products", "per_buffer", "launch", "buffers"):
            got, want = getattr(gathered, name)[end:end + n], getattr(terms[i], name)
            np.testing.assert_array_equal(got[tuple(slice(0, d) for d in want.shape)], want)
            assert got.sum() == want.sum()  # the padding is empty
        np.testing.assert_array_equal(gathered.float_ops[end:end + n], terms[i].float_ops)
        row_extents += [np.pad(extents[i], (0, width - len(extents[i])), constant_values=1.0)] * n
        expected.append(evaluate_terms(terms[i], np.broadcast_to(extents[i], (n, len(extents[i]))), False).values)
        end += n
    assert end == len(gathered.float_ops)
    np.testing.assert_array_equal(evaluate_terms(gathered, np.array(row_extents), False).values,
                                  np.concatenate(expected))


def _tiled_matmul(i_tiles: int, k_inner: int):
    """matmul tiled i0 j i1 k0 k1, its result cached and written back at i0 (a stage computed at a
    loop, whose bindings lose the loops of extent 1 above it)."""
    sch = s_tir.Schedule(_matmul())
    block = sch.get_sblock("matmul")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [i_tiles, None])
    k0, k1 = sch.split(k, [None, k_inner])
    sch.reorder(i0, j, i1, k0, k1)
    sch.reverse_compute_at(sch.cache_write(block, 0, "global"), i0)
    return sch.mod["main"]


def test_a_loop_of_extent_1_is_relearnt_only_where_it_may_have_dropped_out():
    """i0 of extent 1 drops out of the write-back stage computed below it: a program where it is
    longer needs a walk. k1 of extent 1 still indexes the compute block's buffers (the split keeps
    unit loops in its bindings): programs where it is longer reuse the template, and their symbols
    are still the walk's."""
    func = _tiled_matmul(1, 1)
    structure = loop_structure(func)
    columns = {var.name: c for c, var in enumerate(structure.loop_vars)}
    unknown = unindexed_columns(make_template(func, structure))
    assert unknown >> columns["i_0"] & 1 and not unknown >> columns["k_1"] & 1
    dev = get_device("epyc-2vcpu")
    templates = DraftTemplates("llvm", dev)
    funcs = [func, _tiled_matmul(1, 4), _tiled_matmul(2, 4)]
    assert len({loop_structure(f).key for f in funcs}) == 1
    drafts = [d for f in funcs for d in templates.draft([f])]
    _assert_drafts_are_the_walks(funcs, drafts, dev)
    assert templates.times.templates == 2  # k_1 longer: not walked; i_0 longer: walked


def test_the_draft_stage_leaves_no_cycles_for_the_paused_collector(space):
    """The draft holds the garbage collector off (a full collection over a tuning process's objects
    cost more than the draft itself), so what it allocates must be freed by reference counts."""
    funcs = [c.sch.mod["main"] for c in space[1]]
    templates = DraftTemplates("llvm")
    for _ in range(2):  # new templates, then known ones
        gc.collect()
        templates.draft(funcs)
        assert gc.isenabled() and gc.collect() == 0
    gc.disable()
    templates.draft(funcs)
    assert not gc.isenabled()  # the caller's setting is kept
    gc.enable()


def test_template_symbols_of_a_gpu_kernel_and_the_full_features_agree():
    func = gemm_shared_gpu()
    (draft,) = DraftTemplates("cuda", "a100").draft([func])
    full = featurize_prim_func(func, "cuda", device="a100")
    np.testing.assert_array_equal(draft.symbols, full.symbols)
    assert draft.draft_score == pytest.approx(full.draft_score, rel=1e-12)


def test_programs_seen_again_are_not_scored_again(space):
    schedules = [c.sch for c in space[1]]
    feats = CandidateFeatures("llvm", "epyc-7452")
    first = feats.draft(schedules)
    assert feats.times.draft_programs == len(schedules) and feats.times.same_object == 0
    # survivors: the same objects again, found by identity
    again = feats.draft(schedules)
    assert feats.times.same_object == len(schedules) and all(a is b for a, b in zip(first, again))
    # the same programs rebuilt as new objects: scored again through the templates, none walked again
    templates_before = feats.templates.times.templates
    rebuilt = [s_tir.Schedule(s.mod) for s in schedules]
    assert [d.draft_score for d in feats.draft(rebuilt)] == [d.draft_score for d in first]
    assert feats.templates.times.templates == templates_before and feats.times.failures == 0


def test_full_features_of_a_batch_are_each_programs_own(space, monkeypatch):
    import tvm

    import pruner_offline.features.extract as extract_module
    from pruner_offline.features.extract import FeatureAlignmentError

    schedules = [c.sch for c in space[1][:8]]
    alone = [featurize_prim_func(s, "llvm", device="epyc-7452") for s in schedules]
    unreadable = schedules[4]

    def featurize_or_fail(sch, *args, **kwargs):  # a program whose walk and extractor disagree
        if sch is unreadable:
            raise FeatureAlignmentError("PerStoreFeature found 3 statements, the TIR walk 2")
        return featurize_prim_func(sch, *args, **kwargs)

    monkeypatch.setattr(extract_module, "featurize_prim_func", featurize_or_fail)

    def check(feats: CandidateFeatures) -> None:
        got = feats.full(schedules)
        assert got[4] is None and feats.times.failures == 1 and feats.times.full_programs == len(schedules)
        for i, (mine, own) in enumerate(zip(got, alone)):
            if i != 4:
                for name in ("statements", "dataflow", "symbols"):
                    np.testing.assert_array_equal(getattr(mine, name), getattr(own, name))
                assert mine.draft_score == own.draft_score

    check(CandidateFeatures("llvm", "epyc-7452", num_threads=2))

    # a batch the native call refuses as a whole: each program is featurized on its own
    def refuse(*args, **kwargs):
        raise tvm.TVMError("refused")

    monkeypatch.setattr(extract_module, "per_store_features_of_many", refuse)
    check(CandidateFeatures("llvm", "epyc-7452", num_threads=2))


def test_the_cost_model_extracts_on_the_tuning_runs_threads(space):
    _, candidates = space
    run = make_context(named_workload("matmul-small"), tuning_target("llvm", 2), num_threads=3, seed=0,
                       logger=logging.getLogger("test"))
    model = PrunerCostModel.from_checkpoint(REPO / "checkpoints" / "pacm.pt", target_kind="llvm")
    assert model.features.num_threads == 1
    model.predict(run, candidates[:4])
    assert model.features.num_threads == 3
    fixed = PrunerCostModel.from_checkpoint(REPO / "checkpoints" / "pacm.pt", target_kind="llvm", num_threads=2)
    fixed.predict(run, candidates[:4])
    assert fixed.features.num_threads == 2


def test_the_verifier_sees_at_most_verify_max_per_population(space):
    draft = np.linspace(0.1, 1.0, 50)
    seen = []
    scores = draft_then_verify(draft, 0.5, lambda idx: (seen.append(idx), np.ones(len(idx)))[1], most=4)
    assert len(seen) == 1 and sorted(seen[0]) == [46, 47, 48, 49]
    assert (scores[46:] > 0.5).all() and (scores[:46] <= 0.5).all()

    context, candidates = space
    model = PrunerCostModel.from_checkpoint(REPO / "checkpoints" / "pacm.pt", target_kind="llvm", verify_fraction=1.0,
                                            verify_max=3)
    model.predict(context, candidates)
    assert model.features.times.full_programs == 3
    # without online training, measured programs need no full features
    model.update(context, candidates[:5], [RunnerResult([1e-4], None)] * 5)
    assert model.features.times.full_programs == 3 and not model.measured.features


def test_verified_order_is_pacm_order(space):
    context, candidates = space
    model = PrunerCostModel.from_checkpoint(REPO / "checkpoints" / "pacm.pt", target_kind="llvm")
    order = model.verified_order(candidates)
    with torch.no_grad():
        pacm = model.verifier(features_batch([featurize_prim_func(c.sch, "llvm", model.device)
                                              for c in candidates])).numpy()
    assert sorted(order) == list(range(len(candidates)))
    assert np.all(np.diff(pacm[order]) <= 0)


def test_the_search_drafts_every_generation_and_verifies_only_the_survivors():
    model = PrunerCostModel.from_checkpoint(REPO / "checkpoints" / "pacm.pt", target_kind="llvm")
    context = make_context(named_workload("matmul-small"), tuning_target("llvm", 2), num_threads=1, seed=0,
                           logger=logging.getLogger("test"), population_size=32,
                           strategy=DraftThenVerifySearch(model, population_size=32, survivors=8))
    strategy = context.search_strategy
    strategy.pre_tuning(6, 4, context.generate_design_space(), ms.database.MemoryDatabase(), model)
    batch = strategy.generate_measure_candidates()
    assert len(batch) == 4
    assert model.features.times.full_programs == 8  # PaCM: the 8 survivors, once
    assert model.times.predict_calls == 0 and model.features.times.draft_programs >= 32  # the draft: every generation
    strategy.notify_runner_results(batch, [RunnerResult([1e-4], None)] * len(batch))
    assert len(strategy.generate_measure_candidates()) == 2  # what is left of 6 trials
    strategy.notify_runner_results(batch[:2], [RunnerResult([1e-4], None)] * 2)
    assert strategy.generate_measure_candidates() is None
    strategy.post_tuning()


def test_capped_order_takes_at_most_cap_of_a_group_while_others_remain():
    groups = np.array([7, 7, 7, 3, 7, 3, 5])
    order = np.array([0, 1, 2, 4, 3, 5, 6])  # group 7's four first
    np.testing.assert_array_equal(capped_order(order, groups, 2), [0, 1, 3, 5, 6, 2, 4])
    np.testing.assert_array_equal(capped_order(order, groups, 0), order)
    np.testing.assert_array_equal(capped_order(order, groups, 9), order)
    assert len(capped_order(np.array([], dtype=int), groups, 2)) == 0


def _conv2d_search(trials: int, **search):
    """The bundled PaCM's draft-then-verify search over conv2d (many loop structures), pre-tuned for
    ``trials`` in batches of 4; the context is returned too, as the search holds it without owning it."""
    model = PrunerCostModel.from_checkpoint(REPO / "checkpoints" / "pacm.pt", target_kind="llvm")
    context = make_context(named_workload("conv2d"), tuning_target("llvm", 2), num_threads=1, seed=0,
                           logger=logging.getLogger("test"), population_size=64,
                           strategy=DraftThenVerifySearch(model, population_size=64, survivors=8, **search))
    strategy = context.search_strategy
    strategy.pre_tuning(trials, 4, context.generate_design_space(), ms.database.MemoryDatabase(), model)
    return model, strategy, context


def test_the_search_spreads_shortlist_and_batch_over_loop_structures():
    model, strategy, _context = _conv2d_search(8, structure_cap=1, explore=0)
    batch = strategy.generate_measure_candidates()
    structures = model.structures(batch)
    pool = model.features.times.draft_programs
    assert len(batch) == 4 and len(set(structures)) == 4  # conv2d's space has more than 4 structures
    assert model.features.times.full_programs == 8  # PaCM still sees only the shortlist
    # the structure ids are the loop skeleton's: equal keys, equal ids
    keys = [loop_structure(c.sch.mod["main"]).key for c in batch]
    assert len(set(keys)) == 4 and pool >= 32
    strategy.post_tuning()


def test_calibration_divides_each_structure_by_how_far_it_was_off():
    cal = StructureCalibration()
    np.testing.assert_array_equal(cal.scores([1, 2], np.array([4.0, 2.0])), [4.0, 2.0])  # nothing measured
    # structure 1: modelled 1/4 s, measured 1 s (4x off); structure 2: modelled 1/2 s, measured 1/4 s
    cal.add([1, 1, 2, 3], [4.0, 4.0, 2.0, 5.0], [1.0, 1.0, 0.25, float("inf")])  # a failed run is left out
    assert len(cal) == 2
    scores = cal.scores([1, 2, 9], np.array([4.0, 2.0, 3.0]))
    np.testing.assert_allclose(scores[:2], [1.0, 4.0])  # measured throughputs: 2 now ranks above 1
    np.testing.assert_allclose(scores[2], 3.0 / np.exp(np.median([np.log(4.0), np.log(0.5)])))


def test_least_calibration_divides_unmeasured_structures_by_the_least_over_rated():
    # the draft's favourites are measured first and over-rated most: structure 1 4x, structure 2 0.5x
    cal = StructureCalibration("least")
    cal.add([1, 2], [4.0, 2.0], [1.0, 0.25])
    np.testing.assert_allclose(cal.scores([1, 2, 9], np.array([4.0, 2.0, 3.0])), [1.0, 4.0, 6.0])
    with pytest.raises(ValueError, match="unmeasured"):
        StructureCalibration("mean")


def test_calibrated_draft_ranks_learn_from_measured_structures(space):
    context, candidates = space
    model = PrunerCostModel.from_checkpoint(REPO / "checkpoints" / "pacm.pt", target_kind="llvm")  # calibrates
    groups = model.structures(candidates)
    before = model.draft_ranks(candidates)
    top = groups[np.argmax(before)]  # the draft's favourite structure measures 1000x slower than modelled
    measured = [i for i, g in enumerate(groups) if g == top][:2] + [i for i, g in enumerate(groups) if g != top][:2]
    scores = np.array([model.features.draft([candidates[i].sch])[0].draft_score for i in measured])
    slow = np.array([1000.0 if groups[i] == top else 1.0 for i in measured])
    model.update(context, [candidates[i] for i in measured], [RunnerResult([float(x)], None) for x in slow / scores])
    after = model.draft_ranks(candidates)
    assert groups[np.argmax(after)] != top
    same = groups == groups[measured[-1]]  # within a structure the draft's order stays
    assert np.array_equal(np.argsort(before[same]), np.argsort(after[same]))
    plain = PrunerCostModel.from_checkpoint(REPO / "checkpoints" / "pacm.pt", target_kind="llvm", calibrate=False)
    plain.update(context, [candidates[i] for i in measured], [RunnerResult([float(x)], None) for x in slow / scores])
    np.testing.assert_array_equal(plain.draft_ranks(candidates), before)


def test_the_search_explores_structures_not_measured_yet():
    model, strategy, _context = _conv2d_search(12, explore=2)
    batch = strategy.generate_measure_candidates()
    structures = [int(g) for g in model.structures(batch)]
    assert len(batch) == 4 and not set(structures[2:]) & set(structures[:2]) and len(set(structures[2:])) == 2
    strategy.notify_runner_results(batch, [RunnerResult([1e-3], None)] * 4)
    second = [int(g) for g in model.structures(strategy.generate_measure_candidates())]
    assert not set(second[2:]) & set(structures)  # explored: never a structure measured before
    strategy.post_tuning()


def test_past_verify_pool_after_the_verifier_orders_the_whole_pool(monkeypatch):
    model, strategy, _context = _conv2d_search(12, verify_pool_after=4)
    seen = []
    order = model.verified_order
    monkeypatch.setattr(model, "verified_order", lambda candidates: (seen.append(len(candidates)), order(candidates))[1])
    batch = strategy.generate_measure_candidates()
    strategy.notify_runner_results(batch, [RunnerResult([1e-3], None)] * 4)
    assert len(strategy.generate_measure_candidates()) == 4
    assert seen == [8, 32]  # the survivors, then (4 measured) the pool of 4 per survivor
    strategy.post_tuning()
