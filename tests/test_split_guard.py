"""The replay's guarded split (replay/split_guard.py) gives what TIR's predicated split gives.

On small programs: the same guard, the same program where TIR leaves the bindings as they are,
guards of nested splits combined in TIR's order. On real records: every feature featurize stores
is the same with either split, for the cuda records of the bundled datasets that TIR guards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
import tvm_ffi  # noqa: E402
from tvm import s_tir, te, tirx  # noqa: E402

from pruner_offline.features.extract import featurize_prim_func  # noqa: E402
from pruner_offline.replay import replay_record, replayer, split_guard  # noqa: E402
from pruner_offline.replay.split_guard import guarded_split, overshoot  # noqa: E402
from pruner_offline.tenset.records import Record, read_records  # noqa: E402
from pruner_offline.tenset.tasks import load_all_tasks  # noqa: E402

from conftest import BUNDLED, SHARED  # noqa: E402


def _copy(n: int) -> tirx.PrimFunc:
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")
    return te.create_prim_func([a, b])


def _two_stages(n: int) -> tirx.PrimFunc:
    """B and C computed under one loop of C: a loop body of two block realizes."""
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] + 1.0, name="B")
    c = te.compute((n,), lambda i: b[i] * 2.0, name="C")
    return te.create_prim_func([a, c])


def _pair(func: tirx.PrimFunc, edit) -> tuple[s_tir.Schedule, s_tir.Schedule]:
    """``edit(sch, split)`` on two schedules of ``func``: TIR's split, then the guarded one."""
    def guarded(sch, loop, factors):
        return guarded_split(sch, loop, factors, int(sch.get(loop).extent))

    out = []
    for split in (lambda s, l, f: s.split(l, f, preserve_unit_iters=True), guarded):
        sch = s_tir.Schedule(func)
        edit(sch, split)
        out.append(sch)
    return out[0], out[1]


def _realizes(func: tirx.PrimFunc) -> list:
    found = []
    stack = [func.body]
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, s_tir.SBlockRealize):
            found.append(stmt)
            stack.append(stmt.block.body)
        elif isinstance(stmt, tirx.For):
            stack.append(stmt.body)
        elif isinstance(stmt, tirx.SeqStmt):
            stack.extend(reversed(list(stmt.seq)))
    return found


def _predicates(sch: s_tir.Schedule) -> list:
    return [r.predicate for r in _realizes(sch.mod["main"]) if r.block.name_hint != "root"]


def test_overshoot_is_when_the_parts_cover_more_than_the_loop():
    assert overshoot(10, [None, 4]) and overshoot(10, [3, None]) and overshoot(10, [3, 4])
    assert not overshoot(12, [None, 4]) and not overshoot(12, [3, 4]) and not overshoot(12, [None, 12])


def test_a_split_that_needs_no_guard_is_tirs_own():
    a, b = _pair(_copy(12), lambda s, split: split(s, s.get_loops(s.get_sblock("B"))[0], [None, 4]))
    assert tvm_ffi.structural_equal(a.mod, b.mod)


def test_the_guard_is_tirs_and_the_program_the_same():
    a, b = _pair(_copy(10), lambda s, split: split(s, s.get_loops(s.get_sblock("B"))[0], [None, 4]))
    assert any(not isinstance(p, tirx.IntImm) for p in _predicates(a)), "TIR guards this split"
    assert tvm_ffi.structural_equal(a.mod, b.mod)


def test_a_later_split_of_a_part_substitutes_into_the_guard_in_tirs_order():
    def edit(sch, split):
        outer, _ = split(sch, sch.get_loops(sch.get_sblock("B"))[0], [None, 8])  # 100 -> 13 x 8, guarded
        split(sch, outer, [None, 5])  # 13 -> 3 x 5, guarded again
    a, b = _pair(_copy(100), edit)
    pa, pb = _predicates(a), _predicates(b)
    assert [str(p) for p in pa] == [str(p) for p in pb]
    assert "&&" in str(pa[0]) or " and " in str(pa[0])
    fa, fb = (featurize_prim_func(s, "llvm") for s in (a, b))
    assert np.array_equal(fa.statements, fb.statements) and np.array_equal(fa.symbols, fb.symbols)


def test_every_realize_under_the_loop_is_guarded():
    def edit(sch, split):
        c_loop = sch.get_loops(sch.get_sblock("C"))[0]
        outer, _ = split(sch, c_loop, [None, 4])  # 10 -> 3 x 4
        sch.compute_at(sch.get_sblock("B"), outer, preserve_unit_loops=True)
        split(sch, outer, [None, 2])  # 3 -> 2 x 2 over a body holding B's loop and C's realize
    a, b = _pair(_two_stages(10), edit)
    assert [str(p) for p in _predicates(a)] == [str(p) for p in _predicates(b)]
    fa, fb = (featurize_prim_func(s, "llvm") for s in (a, b))
    assert np.array_equal(fa.statements, fb.statements) and np.array_equal(fa.symbols, fb.symbols)


def _dataset(name: str) -> Path | None:
    for root in (BUNDLED.parent / name, SHARED / name):
        if (root / "network_info" / "all_tasks.pkl").is_file():
            return root
    return None


def _guarded_cuda_records(root: Path, limit: int) -> list:
    tasks = {t.key: t for t in load_all_tasks(root / "network_info" / "all_tasks.pkl")}
    out = []
    files = sorted(root.glob("measure_records/*/*.json")) + sorted(root.glob("to_measure_programs/*.json"))
    for path in files:
        for rec in read_records(path):
            # FFSP: the fetch splits of shared-memory copies, which TIR guards when they overshoot
            if isinstance(rec, Record) and rec.target_kind == "cuda" and any(s[0] == "FFSP" for s in rec.raw_steps):
                task = tasks.get((rec.workload_key.text, "cuda"))
                if task is not None:
                    out.append((task, rec))
                if len(out) == limit:
                    return out
    return out


@pytest.mark.parametrize("name", ["ansor-public-logs", "tenset-mini", "ansor-sampled"])
def test_real_cuda_records_store_the_same_features_with_either_split(name, monkeypatch):
    root = _dataset(name)
    if root is None:
        pytest.skip(f"{name} is neither bundled in datasets/ nor present in ../shared/")
    cases = _guarded_cuda_records(root, limit=60)
    assert cases, f"{name} holds cuda records with fetch splits"
    guards = []  # per guarded split, that it was one: the records must exercise the path
    monkeypatch.setattr(split_guard, "overshoot", lambda *a: guards.append(overshoot(*a)) or guards[-1])
    for task, rec in cases:
        with monkeypatch.context() as tir_split:
            tir_split.setattr(replayer, "guarded_split",
                              lambda sch, loop, factors, extent: sch.split(loop, factors, preserve_unit_iters=True))
            tir = replay_record(task, rec)
        ours = replay_record(task, rec)
        assert tir.ok and ours.ok, (rec.source, tir.reason, ours.reason)
        if tvm_ffi.structural_equal(tir.mod, ours.mod):
            continue
        fa, fb = featurize_prim_func(tir.schedule, "cuda"), featurize_prim_func(ours.schedule, "cuda")
        where = str(rec.source)
        assert np.array_equal(fa.statements, fb.statements), where
        assert np.array_equal(fa.dataflow, fb.dataflow), where
        assert np.array_equal(fa.symbols, fb.symbols), where
        assert fa.draft_score == fb.draft_score, where
    assert any(guards), f"no split of {len(cases)} {name} records needed a guard: the test checks nothing"
