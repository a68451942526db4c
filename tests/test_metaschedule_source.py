import json

import numpy as np
import pytest

from pruner_offline.build_store import FeaturizeSettings, run_featurize
from pruner_offline.sources.metaschedule import (RECORD_FILE, WORKLOAD_FILE, is_metaschedule_database,
                                                read_ms_records)
from pruner_offline.store.reader import FeatureStore
from pruner_offline.tenset.records import BadLine


@pytest.fixture(scope="module")
def small_db(h200_ms, tmp_path_factory):
    """12 real H200 records of two workloads, plus a broken line and one naming a missing workload."""
    root = tmp_path_factory.mktemp("db")
    (root / WORKLOAD_FILE).write_bytes((h200_ms / WORKLOAD_FILE).read_bytes())
    lines = (h200_ms / RECORD_FILE).read_text().splitlines()
    keep = [l for l in lines if json.loads(l)[0] == 0][:6] + [l for l in lines if json.loads(l)[0] == 13][:6]
    bad = ['[0, [[], "fast"', json.dumps([99, [[[], []], [1e-4], {"kind": "cuda"}, []]])]
    (root / RECORD_FILE).write_text("\n".join(keep[:3] + bad + keep[3:]) + "\n")
    return root


def test_database_lines_are_checked_before_tvm(small_db):
    assert is_metaschedule_database(small_db)
    items = list(read_ms_records(small_db))
    bad = [i for i in items if isinstance(i, BadLine)]
    assert [b.source.line for b in bad] == [4, 5]
    assert "bad tuning record" in bad[0].reason and "out of range" in bad[1].reason
    good = [i for i in items if not isinstance(i, BadLine)]
    assert len(good) == 12 and all(r.target_kind == "cuda" and r.ok for r in good)


def test_featurize_a_metaschedule_database(small_db, tmp_path):
    out = tmp_path / "ms.h5"
    report = run_featurize(FeaturizeSettings(str(small_db), gpu="h200"), out)
    assert (report.replayed, report.failed, report.bad_lines) == (12, 0, 2)
    data = FeatureStore(out).load()
    assert data.n_records == 12 and len(data.task_keys) == 2
    assert all(k.startswith("ms:") and k.endswith("|cuda") for k in data.task_keys)
    for t in range(2):
        y = data.records["label"][data.records["task_id"] == t]
        assert y.max() == pytest.approx(1.0) and (y > 0).all()
    assert not data.steps.any()  # MetaSchedule traces are no Ansor steps: TLP has nothing to read
    assert np.isfinite(data.statements).all() and data.statements.shape[1] == 174


def test_programs_keep_their_own_costs(h200_ms):
    """Each program must be paired with its own line's run time (TVM's reader re-sorts records by
    time; a mix-up shows as a draft score that no longer tracks the measured times)."""
    from pruner_offline.features.extract import featurize_prim_func
    from pruner_offline.sources.metaschedule import MetaScheduleSource

    records = [r for r in read_ms_records(h200_ms) if not isinstance(r, BadLine) and r.workload == 3][:40]
    source = MetaScheduleSource(h200_ms)
    got = list(source.programs(source.units()[3]).programs)[:40]
    assert [p.line for p in got] == [r.source.line for r in records]
    score = np.array([featurize_prim_func(p.func, "cuda", device="h200").draft_score for p in got])
    cost = np.array([p.cost for p in got])
    assert np.allclose(cost, [r.cost for r in records])
    ranks = np.argsort(np.argsort(score)), np.argsort(np.argsort(cost))
    assert np.corrcoef(*ranks)[0, 1] < -0.6


def test_compare_skips_tlp_without_ansor_steps(small_db, tmp_path):
    from pruner_offline.training.compare import compare

    out = tmp_path / "ms.h5"
    run_featurize(FeaturizeSettings(str(small_db), gpu="h200"), out)
    result, _ = compare(out, "within_task", tmp_path / "cmp", models=["tlp"])
    assert "no Ansor steps" in result["tlp"]["skipped"]


def test_pretrain_skips_tlp_without_ansor_steps_and_refuses_when_nothing_is_left(small_db, h200_ms, tmp_path, capsys):
    from pruner_offline.cli import main

    tiny = tmp_path / "ms.h5"
    run_featurize(FeaturizeSettings(str(small_db), gpu="h200"), tiny)
    capsys.readouterr()
    assert main(["pretrain", "--data", str(tiny), "--model", "tlp", "--out", str(tmp_path / "a"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "nothing to train" in err and "no Ansor steps" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "a" / "tlp.pt").exists()
    # 12 records leave nothing to validate on, which early stopping and checkpoint choice need
    assert main(["pretrain", "--data", str(tiny), "--model", "draft", "--out", str(tmp_path / "a"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "none to validate on" in err and len(err.splitlines()) == 1

    db = tmp_path / "db"
    db.mkdir()
    (db / WORKLOAD_FILE).write_bytes((h200_ms / WORKLOAD_FILE).read_bytes())
    lines = (h200_ms / RECORD_FILE).read_text().splitlines()
    (db / RECORD_FILE).write_text("\n".join([l for l in lines if json.loads(l)[0] == 0][:30]
                                            + [l for l in lines if json.loads(l)[0] == 13][:30]) + "\n")
    store = tmp_path / "ms60.h5"
    run_featurize(FeaturizeSettings(str(db), gpu="h200"), store)
    capsys.readouterr()
    assert main(["pretrain", "--data", str(store), "--model", "draft", "tlp", "--max-epochs", "1",
                 "--out", str(tmp_path / "b"), "--quiet", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("tlp: skipped, no Ansor steps") for line in lines)
    result = json.loads(lines[-1])
    assert "no Ansor steps" in result["tlp"]["skipped"] and "peak@1" in result["draft"]
    assert (tmp_path / "b" / "draft.pt").is_file() and not (tmp_path / "b" / "tlp.pt").exists()
