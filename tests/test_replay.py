"""Replay of real TenSet records (tenset-mini) on today's TVM: numerics on LLVM, GPU checks on CUDA."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

tvm = pytest.importorskip("tvm")

import tvm_ffi  # noqa: E402

from pruner_offline.replay import api, record_target, replay_record  # noqa: E402
from pruner_offline.replay.replayer import prefix_key  # noqa: E402
from pruner_offline.replay.gpu import OVER_LIMITS, check_gpu_program  # noqa: E402
from pruner_offline.tenset.records import Record, read_records  # noqa: E402
from pruner_offline.tenset.steps import CacheWriteStep, ComputeAtStep, ComputeInlineStep  # noqa: E402
from pruner_offline.tenset.tasks import Task, load_all_tasks  # noqa: E402

from conftest import tenset_mini_path  # noqa: E402
from replay_checks import assert_replay_computes_the_compute  # noqa: E402

DATA = tenset_mini_path()
pytestmark = pytest.mark.skipif(DATA is None, reason="tenset-mini is neither bundled in datasets/ nor in ../shared/")

PER_TASK = 3  # records per task: first, middle, last line of the file


def _sample(path: Path) -> list[Record]:
    records = [r for r in read_records(path) if isinstance(r, Record)]
    picks = sorted({0, len(records) // 2, len(records) - 1})[:PER_TASK]
    return [records[i] for i in picks]


def _cases(pattern: str) -> list[tuple[Task, Record]]:
    if DATA is None:
        return []
    tasks = {t.key: t for t in load_all_tasks(DATA / "network_info" / "all_tasks.pkl")}
    out = []
    for path in sorted(DATA.glob(pattern)):
        for rec in _sample(path):
            out.append((tasks[(rec.workload_key.text, rec.target_kind)], rec))
    return out


LLVM = _cases("measure_records/*/*.json")
CUDA = _cases("to_measure_programs/*.json")


def _id(case: tuple[Task, Record]) -> str:
    return f"{case[0].desc}:{case[1].source.line}"


@pytest.mark.parametrize("case", LLVM, ids=_id)
def test_llvm_replay_matches_unscheduled(case):
    task, rec = case
    res = replay_record(task, rec)
    assert res.ok, f"{rec.source}: {res.reason}: {res.detail}"
    assert_replay_computes_the_compute(task, res.mod, rec.source.line)


@pytest.mark.parametrize("case", CUDA, ids=_id)
def test_cuda_replay_verifies_and_generates_source(case):
    task, rec = case
    res = replay_record(task, rec)
    assert res.ok, f"{rec.source}: {res.reason}: {res.detail}"
    check = check_gpu_program(res.mod, record_target(rec.target, rec.hardware_params), rec.hardware_params)
    # unmeasured samples of Ansor's search may exceed the block limits; nothing else may fail
    assert check.ok or check.reason == OVER_LIMITS, check.reason
    assert not check.ok or "__global__" in check.source


def test_cuda_replays_are_mostly_within_the_gpu_limits():
    """The per-record test above accepts programs over the block limits (unmeasured samples of
    Ansor's search): checked together, most must pass the GPU checks and generate CUDA source."""
    ok = 0
    for task, rec in CUDA:
        res = replay_record(task, rec)
        check = check_gpu_program(res.mod, record_target(rec.target, rec.hardware_params), rec.hardware_params)
        ok += check.ok and "__global__" in check.source
    assert ok >= len(CUDA) // 2, f"only {ok} of {len(CUDA)} replayed CUDA programs verify"


def test_llvm_covers_every_task():
    assert len({t.key for t, _ in LLVM}) == 13
    assert len({t.key for t, _ in CUDA}) == 19


def test_broken_record_gives_a_reason():
    task, rec = LLVM[0]
    bad = dataclasses.replace(rec, raw_steps=tuple(rec.raw_steps) + (["CA", 99, 0, 0],))
    res = replay_record(task, bad)
    assert not res.ok and res.reason == "bad stage index"
    bad_iter = dataclasses.replace(rec, raw_steps=(["SP", len(task.graph.ops) - 1, 77, 4, [2], 1],))
    res = replay_record(task, bad_iter)
    assert not res.ok and res.reason == "bad iterator index"
    assert isinstance(bad.steps[-1], ComputeAtStep)


def test_record_of_another_task_is_refused():
    (task, _), (_, other) = LLVM[0], LLVM[-1]
    res = replay_record(task, other)
    assert not res.ok and res.reason == "record does not belong to task"


def _from_the_start(task: Task, rec: Record) -> api.ReplayResult:
    return api._replay(lambda: api._start(task), rec.steps)


def test_records_replayed_from_a_shared_prefix_are_the_records_replayed_from_the_start():
    """Records of a task that share their leading stage steps continue from one cached state
    (replayer.prefix_key); the programs are the ones a replay from the start gives."""
    api._after_prefix.cache_clear()
    keyed = [(t, r) for t, r in LLVM + CUDA if prefix_key(r.steps)]
    assert len(keyed) > 10 and any(isinstance(s, ComputeInlineStep) for _, r in keyed for s in prefix_key(r.steps))
    for task, rec in keyed:
        ours, start = replay_record(task, rec), _from_the_start(task, rec)
        assert ours.ok and start.ok and tvm_ffi.structural_equal(ours.mod, start.mod), _id((task, rec))
    assert api._after_prefix.cache_info().hits > 0  # the records did share prefixes


def test_a_prefix_that_fails_is_reported_as_from_the_start():
    """A cache_write after a loop step of its stage fails in the prefix: the record is replayed from
    the start, which reports that step."""
    task, rec = next((t, r) for t, r in CUDA if any(isinstance(s, CacheWriteStep) for s in prefix_key(r.steps)))
    chw = next(s for s in rec.steps if isinstance(s, CacheWriteStep))
    first_iter_split = ["SP", chw.stage, 0, 1, [1], 1]
    bad = dataclasses.replace(rec, raw_steps=(first_iter_split, *rec.raw_steps))
    assert prefix_key(bad.steps)
    res, start = replay_record(task, bad), _from_the_start(task, bad)
    assert not res.ok and (res.reason, res.detail) == (start.reason, start.detail)
    assert res.reason == "cache_write after loop steps"
