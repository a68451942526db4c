"""Replay of every Ansor record TVM's tutorials ever published and its unit tests embedded
(datasets/ansor-public-history: log formats v0.1 to v0.6, several schedules per task, measured by
others on their machines).

All of them replay but the sparse operator, whose reduction extent is read from an index buffer;
the Ansor view agrees with Ansor's own features as closely as on ansor-public-logs; and one line
of each log version and target is checked numerically (llvm) or by verify_gpu_code and CUDA
codegen (cuda)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from pruner_offline.replay import record_target, replay_record  # noqa: E402
from pruner_offline.replay.fidelity import check_replay  # noqa: E402
from pruner_offline.replay.gpu import check_gpu_program  # noqa: E402
from pruner_offline.tenset.dataset import discover, load_task_index  # noqa: E402
from pruner_offline.tenset.records import Record, read_records  # noqa: E402

from conftest import BUNDLED  # noqa: E402
from replay_checks import assert_replay_computes_the_compute  # noqa: E402

DATA = BUNDLED.parent / "ansor-public-history"
pytestmark = pytest.mark.skipif(not (DATA / "oracle" / "index.json").is_file(),
                                reason=f"{DATA} is not there (bundled with the repository)")
VIEW_FLOOR = 0.95  # as tests/test_replay_public.py: every group agreed on >= 95% when written


def _records() -> list[tuple[Path, Record]]:
    if not DATA.is_dir():
        return []
    return [(p, r) for p in sorted(DATA.glob("measure_records/*/*.json")) for r in read_records(p)
            if isinstance(r, Record)]


RECORDS = _records()


def _one_per_version_and_target() -> list[Record]:
    first: dict[tuple[str, str], Record] = {}
    for path, rec in RECORDS:
        if path.parent.name != "sparse_dense":
            first.setdefault((rec.target_kind, rec.version), rec)
    return [first[k] for k in sorted(first)]


@pytest.fixture(scope="module")
def report():
    return check_replay(DATA)


@pytest.fixture(scope="module")
def tasks():
    return load_task_index(discover(DATA)).tasks


def test_the_history_spans_five_log_versions_on_both_targets():
    assert {(r.target_kind, r.version) for _, r in RECORDS} == {
        ("llvm", "v0.2"), ("llvm", "v0.3"), ("llvm", "v0.5"), ("llvm", "v0.6"),
        ("cuda", "v0.1"), ("cuda", "v0.2"), ("cuda", "v0.3"), ("cuda", "v0.5"), ("cuda", "v0.6")}
    assert len(RECORDS) == 238


def test_every_line_replays_but_the_sparse_operator(report):
    llvm, cuda = report.by_target["llvm"], report.by_target["cuda"]
    assert (llvm.programs, llvm.replayed, llvm.no_oracle) == (100, 98, 0)
    assert dict(llvm.failures) == {"compute rebuild": 2}  # the two sparse_dense lines
    # the v0.1 and v0.2 cuda lines have no oracle (Ansor gives no features without hardware
    # params); test_one_line_of_each_version_computes_or_compiles replays them
    assert (cuda.programs, cuda.replayed, cuda.no_oracle, dict(cuda.failures)) == (138, 136, 2, {})


def test_the_gpu_verdicts_agree_with_ansors(report):
    # five lines are over their record's limits (one sm_86 line vectorizes 8 floats past its 16-byte
    # limit): Ansor's lowering and our verify_gpu_code reject the same five
    assert dict(report.by_target["cuda"].gpu_verdicts) == {(True, True): 131, (False, False): 5}


@pytest.mark.parametrize("kind", ["llvm", "cuda"])
def test_the_ansor_view_agrees_with_ansor(report, kind):
    t = report.by_target[kind]
    stored = t.group_agreement(report.feature_names)
    for group, agreement in t.ansor_view.group_agreement(report.feature_names).items():
        assert agreement >= VIEW_FLOOR, (group, agreement)
        assert agreement >= stored[group], group


@pytest.mark.parametrize("rec", _one_per_version_and_target(), ids=lambda r: f"{r.target_kind}-{r.version}")
def test_one_line_of_each_version_computes_or_compiles(rec, tasks):
    task = tasks[(rec.workload_key.text, rec.target_kind)]
    res = replay_record(task, rec)
    assert res.ok, f"{rec.source}: {res.reason}: {res.detail}"
    if rec.target_kind == "llvm":
        assert_replay_computes_the_compute(task, res.mod, 0)
    else:
        hw = rec.hardware_params or task.hardware_params
        check = check_gpu_program(res.mod, record_target(rec.target, hw), hw)
        assert check.ok, check.reason
        assert "__global__" in check.source


def test_the_sparse_operator_fails_with_its_reason(tasks):
    (path, rec), *_ = [(p, r) for p, r in RECORDS if p.parent.name == "sparse_dense"]
    res = replay_record(tasks[(rec.workload_key.text, rec.target_kind)], rec)
    assert (res.ok, res.reason) == (False, "compute rebuild")
    assert "depends on" in res.detail and "sparse" in res.detail


def test_the_v01_line_has_the_thread_extents_tvms_own_test_expected(tasks):
    # TVM's test_auto_scheduler_feature.py (test_gpu_feature) lowers this record and expects
    # blockIdx.x 8, vthread 4, threadIdx.x 16, and no threadIdx.y or blockIdx.z
    from pruner_offline.features.per_store import per_store_features
    from pruner_offline.features.schema import PER_STORE_COLUMNS

    (rec,) = [r for _, r in RECORDS if r.version == "v0.1"]
    res = replay_record(tasks[(rec.workload_key.text, rec.target_kind)], rec)
    assert res.ok, res.reason
    rows = per_store_features(res.schedule, "cuda")
    expect = {"blockIdx_x_len": 8, "vthread_len": 4, "threadIdx_x_len": 16, "threadIdx_y_len": 1,
              "blockIdx_z_len": 1}
    for name, extent in expect.items():
        assert np.allclose(rows[:, PER_STORE_COLUMNS.index(name)], np.log2(extent + 1)), name
    assert (rows[:, PER_STORE_COLUMNS.index("is_gpu")] == 1).all()
