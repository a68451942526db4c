"""The native TIR walk (features/native_walk.py) gives tir_walk.walk's result, field for field, on
real replayed records of both targets and on MetaSchedule's own candidates, and featurization
through it stores the same arrays as through the Python walk."""

from __future__ import annotations

from itertools import islice
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tvm import tirx

from pruner_offline.build_store import FeaturizeSettings, plan_units
from pruner_offline.features import native_walk
from pruner_offline.features.extract import featurize_many
from pruner_offline.features.native import compiled
from pruner_offline.features.native_walk import fast_walk, walks
from pruner_offline.features.tir_walk import walk
from pruner_offline.sources.base import open_source
from pruner_offline.tuning.search.sampling import sample_candidates
from pruner_offline.tuning.frontends.workloads import named_workload

from conftest import BUNDLED, SHARED
from test_features import gemm_shared_gpu

pytestmark = pytest.mark.skipif(compiled() is None, reason="the native TIR readers did not build here (no C++ compiler?)")


def _replayed(root: Path, per_unit: int) -> dict[str, list]:
    """{target kind: replayed schedules}, the first ``per_unit`` programs of every record file."""
    source = open_source(root)
    out: dict[str, list] = {}
    for unit in plan_units(source, FeaturizeSettings(str(root), include_unmeasured=True)):
        got = source.programs(unit)
        scheduled = [p.func for p in islice(got.programs, per_unit) if p.func is not None]
        out.setdefault(got.target_kind, []).extend(scheduled)
    return out


def _assert_same_walks(funcs: list) -> list:
    native = walks(funcs)
    assert native is not None and len(native) == len(funcs)
    python = [walk(f) for f in funcs]
    for i, (got, want) in enumerate(zip(native, python)):
        assert got == want, f"program {i}"
    return python


def _coverage(results: list) -> dict[str, int]:
    stmts = [s for r in results for s in r.rows + r.inits]
    return {
        "inits": sum(len(r.inits) for r in results),
        "guard ops": sum(s.guard_ops for s in stmts),
        "other float ops": sum(s.other_float_ops for s in stmts),
        "thread loops": sum(loop.thread_tag != "" for s in stmts for loop in s.loops),
        "non-global buffers": sum(a.scope != "global" for s in stmts for a in (s.write, *s.reads)),
        "reductions": sum(s.has_reduce_axis for s in stmts),
    }


@pytest.mark.parametrize("name", ["tenset-mini", "ansor-public-logs", "ansor-sampled"])
def test_the_native_walk_is_the_python_walk_on_replayed_records(name):
    roots = [r for r in (BUNDLED.parent / name, SHARED / name) if (r / "network_info" / "all_tasks.pkl").is_file()]
    if not roots:
        pytest.skip(f"{name} is neither bundled in datasets/ nor present in ../shared/")
    by_target = _replayed(roots[0], per_unit=12)
    assert set(by_target) == {"cuda", "llvm"}
    results = []
    for schedules in by_target.values():
        results += _assert_same_walks([sch.mod["main"] for sch in schedules])
    covered = _coverage(results)
    # what the walk tells apart must occur, or the comparison checks nothing of it
    for what in ("inits", "thread loops", "non-global buffers", "reductions"):
        assert covered[what] > 0, (what, covered)


def test_the_native_walk_is_the_python_walk_on_metaschedule_candidates():
    funcs = [c.sch.mod["main"] for wl in ("conv2d", "depthwise", "dense", "batch-matmul")
             for c in sample_candidates(named_workload(wl), 12, seed=3)[1]]
    covered = _coverage(_assert_same_walks(funcs + [gemm_shared_gpu()]))
    assert covered["guard ops"] > 0 and covered["thread loops"] > 0, covered  # padding's bounds tests


def test_what_the_native_walk_cannot_read_is_none_and_costs_the_others_nothing():
    func = gemm_shared_gpu()
    first, *others, last = walks([func, tirx.IntImm("int32", 1), SimpleNamespace(), func])
    assert others == [None, None] and first == last == walk(func) == fast_walk(func)
    with pytest.raises(AttributeError):  # the Python walk's own error for what is no PrimFunc
        fast_walk(tirx.IntImm("int32", 1))


def test_featurization_stores_the_same_arrays_through_either_walk(monkeypatch):
    path = next((r for r in (BUNDLED, SHARED / "tenset-mini") if (r / "network_info").is_dir()), None)
    if path is None:
        pytest.skip("tenset-mini is neither bundled in datasets/ nor present in ../shared/")
    for kind, schedules in _replayed(path, per_unit=4).items():
        native = featurize_many(schedules, kind)
        with monkeypatch.context() as python_only:
            python_only.setattr(native_walk, "compiled", lambda: None)
            python = featurize_many(schedules, kind)
        for a, b in zip(native, python):
            assert not isinstance(a, Exception), a
            for field in ("statements", "dataflow", "symbols"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
            assert a.draft_score == b.draft_score
