"""The draft stage of our tuning cost model: batched analytic scores, programs found again by identity
or structural hash instead of walked again, the walk shared with the verifier, and the verifier's
per-population cap."""

import numpy as np
import pytest
from tvm import s_tir
from tvm.s_tir.meta_schedule.runner import RunnerResult

from pruner_offline.features import get_device
from pruner_offline.features.draft_score import analytic_score, analytic_scores
from pruner_offline.features.extract import featurize_prim_func, psa_batch
from pruner_offline.features.symbols import psa_symbols
from pruner_offline.features.tir_walk import walk
from pruner_offline.tuning.candidates import CandidateFeatures
from pruner_offline.tuning.cost_model import PrunerCostModel
from pruner_offline.tuning.ranking import draft_then_verify
from pruner_offline.tuning.sampling import sample_candidates
from pruner_offline.tuning.workloads import named_workload

from conftest import REPO


@pytest.fixture(scope="module")
def space():
    return sample_candidates(named_workload("matmul-small"), 24, seed=3)


def test_batched_scores_equal_one_program_at_a_time(space):
    symbols = [psa_symbols(walk(c.sch.mod["main"]).rows, False) for c in space[1]]
    for device in ("epyc-7452", "epyc-2vcpu", "h200"):  # both branches of the formula
        dev = get_device(device)
        batched = analytic_scores(symbols, dev)
        single = np.array([analytic_score(s, dev) for s in symbols])
        np.testing.assert_allclose(batched, single, rtol=1e-12)
        assert len(set(np.round(np.log(batched), 6))) > 5  # the candidates are told apart
    assert len(analytic_scores([], get_device("epyc-7452"))) == 0


def test_draft_inputs_are_what_the_full_features_hold(space):
    schedules = [c.sch for c in space[1]]
    for sch, d in zip(schedules, psa_batch(schedules, "llvm")):
        full = featurize_prim_func(sch, "llvm")
        np.testing.assert_array_equal(d.symbols, full.symbols)
        assert d.draft_score == pytest.approx(full.draft_score, rel=1e-12)
        shared = featurize_prim_func(sch, "llvm", walked=d.walked)  # the verifier reuses the draft's walk
        for a, b in ((shared.statements, full.statements), (shared.dataflow, full.dataflow)):
            np.testing.assert_array_equal(a, b)


def test_programs_seen_again_are_not_walked_again(space):
    schedules = [c.sch for c in space[1]]
    feats = CandidateFeatures("llvm", "epyc-7452")
    first = feats.draft(schedules)
    assert feats.times.draft_programs == len({id(d) for d in first}) and feats.times.same_object == 0
    # survivors: the same objects again, found by identity
    again = feats.draft(schedules)
    assert feats.times.same_object == len(schedules) and all(a is b for a, b in zip(first, again))
    # the same programs rebuilt as new objects: found by structural hash, still not walked
    rebuilt = [s_tir.Schedule(s.mod) for s in schedules]
    walked_before = feats.times.draft_programs
    assert [d.draft_score for d in feats.draft(rebuilt)] == [d.draft_score for d in first]
    assert feats.times.draft_programs == walked_before and feats.times.hits >= 2 * len(schedules)
    assert feats.times.failures == 0


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
