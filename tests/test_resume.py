"""A tuning run stopped part way is continued by the same command (tuning/run/resume.py): the work
directory's database counts against --trials, a last line cut short is dropped, the cost model
learns what was measured before, and the report counts it."""

import io
import json
import logging
import math
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from tvm.s_tir import meta_schedule as ms

from pruner_offline.cli import main
from pruner_offline.errors import BadInput
from pruner_offline.targets import tuning_target
from pruner_offline.tenset.labels import FAILED_COST
from pruner_offline.tuning.context import make_context
from pruner_offline.tuning.cost_model.pruner import PrunerCostModel
from pruner_offline.tuning.run.resume import PastTrials, learn_past, past_trials, repair_database
from pruner_offline.tuning.frontends.workloads import named_workload

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
RECORDS = "database_tuning_record.json"


def _tune(work_dir: Path, trials: int, *extra: str) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["tune", "--workload", "matmul-small", "--cost-model", "random", "--trials", str(trials),
                   "--trials-per-batch", "4", "--population", "16", "--seed", "0", "--work-dir", str(work_dir),
                   "--quiet", *extra])
    assert rc == 0
    return json.loads(out.getvalue().strip().splitlines()[-1])


def _means(work_dir: Path) -> list[float]:
    out = []
    for line in (work_dir / RECORDS).read_text().splitlines():
        secs = json.loads(line)[1][1]
        out.append(float(np.mean(secs)) if secs and max(secs) < FAILED_COST else math.inf)
    return out


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> tuple[Path, dict]:
    work_dir = tmp_path_factory.mktemp("run")
    return work_dir, _tune(work_dir, 4)


def test_a_run_cut_short_while_writing_is_continued_to_its_budget(first_run, tmp_path):
    first, report = first_run
    assert report["trials"] == 4 and report["resumed_trials"] == 0
    work_dir = tmp_path / "run"
    work_dir.mkdir()
    for f in first.glob("database_*.json"):
        (work_dir / f.name).write_bytes(f.read_bytes())
    data = (work_dir / RECORDS).read_bytes()
    (work_dir / RECORDS).write_bytes(data[:-40])  # the last record's write stopped part way
    kept = _means(first)[:3]

    resumed = _tune(work_dir, 6)
    assert resumed["resumed_trials"] == 3 and resumed["trials"] == 6
    assert resumed["trials_per_batch"] == [6]  # 3 left of 6: one batch, counted on from 3
    new = _means(work_dir)[3:]
    assert len(_means(work_dir)) == 6 and len(new) == 3
    assert resumed["best_latency_s"] == pytest.approx(min(kept + new))
    log = (work_dir / "logs" / "tvm.s_tir.meta_schedule.logging.task_scheduler.log").read_text()
    assert f"{RECORDS}:4: dropped a line cut short" in log and "resuming: 3 trials measured before" in log

    again = _tune(work_dir, 6)  # the budget is spent: nothing measured, the database's best reported
    assert again["resumed_trials"] == 6 and again["trials"] == 6 and again["trials_per_batch"] == []
    # nothing searched is told by the empty batches and the unchanged database below, not by a clock
    # (search_seconds, rounded to ms, read 0.001 once on a busy machine)
    assert again["best_latency_s"] == pytest.approx(min(kept + new))
    assert len(_means(work_dir)) == 6


def test_a_bad_line_inside_the_database_is_refused_naming_it(first_run, tmp_path, capsys):
    first, _ = first_run
    for f in first.glob("database_*.json"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    lines = (tmp_path / RECORDS).read_bytes().splitlines(keepends=True)
    (tmp_path / RECORDS).write_bytes(b"".join([lines[0], b"[0, [\"not a trace\"]]\n", *lines[1:]]))
    with pytest.raises(BadInput, match=rf"{RECORDS}:2: bad tuning record"):
        repair_database(tmp_path)
    assert main(["tune", "--workload", "matmul-small", "--cost-model", "random", "--trials", "8",
                 "--work-dir", str(tmp_path), "--quiet"]) == 2
    assert f"{RECORDS}:2: bad tuning record" in capsys.readouterr().err
    # a cut-short workload line (the first thing a run writes) is dropped like a record's
    (tmp_path / RECORDS).write_bytes(b"")
    workloads = (tmp_path / "database_workload.json").read_bytes()
    (tmp_path / "database_workload.json").write_bytes(workloads + workloads[:30])
    assert [n.split(": ")[1] for n in repair_database(tmp_path)] == ["dropped a line cut short (30 bytes, no newline), "
                                                                     "left by a run that was stopped while writing it"]
    assert (tmp_path / "database_workload.json").read_bytes() == workloads
    assert repair_database(tmp_path / "absent") == []
    # JSON, but not a workload: MetaSchedule's loader fails inside, the directory is named
    (tmp_path / "database_workload.json").write_text('["123", "AAAA"]\n')
    assert main(["tune", "--workload", "matmul-small", "--cost-model", "random", "--trials", "8",
                 "--work-dir", str(tmp_path), "--quiet"]) == 2
    assert f"{tmp_path}: MetaSchedule cannot load the database there" in capsys.readouterr().err


def test_the_cost_model_learns_the_programs_measured_before(first_run):
    first, _ = first_run
    database = ms.database.JSONDatabase(work_dir=str(first))
    context = make_context(named_workload("matmul-small"), tuning_target("llvm", 2), num_threads=1, seed=0,
                           logger=logging.getLogger("test_resume"))
    past, = past_trials(database, [context])
    assert past.trials == 4 and past.best_s == pytest.approx(min(_means(first)))
    other = make_context(named_workload("matmul"), tuning_target("llvm", 2), num_threads=1, seed=0,
                         logger=logging.getLogger("test_resume"))
    assert past_trials(database, [other])[0].trials == 0  # another workload's records are not this task's

    seen = []
    model = PrunerCostModel.from_checkpoint(CHECKPOINTS / "pacm.pt", target_kind="llvm",
                                            on_update=lambda v, feats, costs, tasks: seen.append((feats, costs)))
    failed = ms.database.TuningRecord(past.records[0].trace, past.records[0].workload, [1e10],
                                      past.records[0].target, past.records[0].args_info)
    learn_past(model, context, PastTrials((*past.records, failed)))
    model.learn()
    (feats, costs), = seen
    assert len(feats) == 5 and all(f.statements.shape[0] > 0 for f in feats)
    measured = sorted(float(np.mean([float(s) for s in r.run_secs])) for r in past.records)
    assert sorted(costs[:4]) == pytest.approx(measured) and costs[4] == FAILED_COST
