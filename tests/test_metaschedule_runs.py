"""A directory of past MetaSchedule tuning runs as training data: `pretrain --data DIR_OF_RUNS`."""

import json

import numpy as np
import pytest

from pruner_offline.cli import main
from pruner_offline.sources import open_source
from pruner_offline.sources.metaschedule import RECORD_FILE, WORKLOAD_FILE
from pruner_offline.sources.metaschedule_runs import MetaScheduleRunsSource
from pruner_offline.training.export import load_model


def _write_db(root, workload_lines: list[str], records: list[tuple[int, str]]) -> None:
    """records: (new workload index, original record line)."""
    root.mkdir(parents=True)
    (root / WORKLOAD_FILE).write_text("\n".join(workload_lines) + "\n")
    out = []
    for index, line in records:
        obj = json.loads(line)
        obj[0] = index
        out.append(json.dumps(obj))
    (root / RECORD_FILE).write_text("\n".join(out) + "\n")


@pytest.fixture(scope="module")
def past_runs(h200_ms, tmp_path_factory):
    """Two real H200 runs under one parent, at different depths: run A tuned workloads 0 and 13,
    run B tuned 13 again (at another index of its own database) and 5; plus an unrelated file."""
    root = tmp_path_factory.mktemp("past")
    workloads = (h200_ms / WORKLOAD_FILE).read_text().splitlines()
    by_workload: dict[int, list[str]] = {}
    for line in (h200_ms / RECORD_FILE).read_text().splitlines():
        by_workload.setdefault(json.loads(line)[0], []).append(line)
    _write_db(root / "run-a", [workloads[0], workloads[13]],
              [(0, l) for l in by_workload[0][:6]] + [(1, l) for l in by_workload[13][:4]])
    _write_db(root / "older" / "run-b", [workloads[5], workloads[13]],
              [(1, l) for l in by_workload[13][4:8]] + [(0, l) for l in by_workload[5][:5]])
    (root / "notes.txt").write_text("not a database\n")
    return root


def test_runs_are_found_and_a_workload_tuned_twice_is_one_task(past_runs):
    source = open_source(past_runs)
    assert isinstance(source, MetaScheduleRunsSource)
    assert [p.relative_to(past_runs).as_posix() for p in source.databases()] == ["older/run-b", "run-a"]
    units = source.units()
    got = [source.programs(u) for u in units]
    assert [g.records_read for g in got] == [5, 8, 6]  # run-b's order first: workload 5, then 13 from both
    assert len({g.task_key for g in got}) == 3 and all(g.target_kind == "cuda" for g in got)
    merged = list(got[1].programs)
    labels = np.array([p.label for p in merged])
    # one task: labels are relative to the best of both runs, so only one program has label 1
    assert labels.max() == pytest.approx(1.0) and (labels == labels.max()).sum() == 1
    assert all(p.func is not None for p in merged)
    assert "run-a#workload=1" in units[1].name and "older/run-b#workload=1" in units[1].name
    # a single database stays a database source
    assert open_source(past_runs / "run-a").kind == "metaschedule"


def test_pretrain_on_a_directory_of_past_runs(past_runs, tmp_path, capsys):
    rc = main(["pretrain", "--data", str(past_runs), "--model", "draft", "--max-epochs", "1",
               "--out", str(tmp_path / "run"), "--quiet"])
    assert rc == 0, capsys.readouterr().err
    _, meta = load_model(tmp_path / "run" / "draft.pt")
    assert meta["devices"]["cuda"]["name"] == "h200"


def test_info_lists_every_run(past_runs, capsys):
    assert main(["info", str(past_runs), "--json"]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["source"] == "metaschedule-runs"
    assert [d["records"] for d in info["databases"]] == [9, 10]


def test_a_directory_of_links_to_runs_is_read_through_them(past_runs, tmp_path):
    """Past runs gathered as links to where they were left; a link back up the tree is entered once."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "a").symlink_to(past_runs / "run-a", target_is_directory=True)
    (tmp_path / "mine" / "old").symlink_to(past_runs / "older", target_is_directory=True)
    (tmp_path / "mine" / "loop").symlink_to(tmp_path / "mine", target_is_directory=True)
    source = open_source(tmp_path / "mine")
    assert isinstance(source, MetaScheduleRunsSource)
    assert [p.relative_to(tmp_path / "mine").as_posix() for p in source.databases()] == ["a", "old/run-b"]
    assert [source.programs(u).records_read for u in source.units()] == [6, 8, 5]
