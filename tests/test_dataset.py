import json
import os
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

from pruner_offline.cli import main
from pruner_offline.tenset.dataset import (
    DatasetError, discover, iter_task_records, load_task_index,
)
from pruner_offline.tenset.labels import task_labels
from pruner_offline.tenset.splits import ALL_FIVE, SplitError, SplitSpec, parse_split, test_mask as split_mask


def _info_json(capsys, *args):
    assert main(["info", *args, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_info_matches_the_dataset_readme(capsys, tenset_mini):
    info = _info_json(capsys, str(tenset_mini))
    assert info["tasks"] == 32
    assert info["tasks_by_target"] == {"cuda": 19, "llvm": 13}
    assert info["records"] == 1103
    assert info["failed_records"] == 4
    assert info["failures_by_reason"] == {"build_timeout": 4}
    assert info["unknown_task_records"] == 0
    assert info["bad_lines"] == 0
    assert info["devices"] == {"epyc-zen3": 1103}
    assert info["unmeasured_programs"] == 1900
    assert info["networks"] == 3
    assert {n["name"] for n in info["network_tasks"]} == {"mlp", "mobilenet_v1", "resnet_18"}
    assert info["small_tasks"] == 2
    assert set(info["step_histogram"]) >= {"SP", "FSP", "FFSP", "RE", "FU", "AN", "PR", "CA", "CI", "CR",
                                           "CHR", "CHW", "RF", "SA"}
    assert info["step_histogram"]["CHR"] > 0 and info["step_histogram"]["RF"] > 0


def test_info_is_a_console_script(tenset_mini):
    out = subprocess.run([sys.executable, "-m", "pruner_offline.cli", "info", str(tenset_mini), "--json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1])["records"] == 1103
    assert "scanning" in out.stderr  # the progress bar goes to stderr


def _copy(tenset_mini, tmp_path, *, network_info=True):
    root = tmp_path / "ds"
    shutil.copytree(tenset_mini / "measure_records", root / "measure_records")
    if network_info:
        shutil.copytree(tenset_mini / "network_info", root / "network_info")
    for p in root.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return root


def test_a_dataset_without_network_info_still_reads(capsys, tenset_mini, tmp_path):
    info = _info_json(capsys, str(_copy(tenset_mini, tmp_path, network_info=False)))
    assert info["tasks"] == 0 and info["networks"] == 0
    assert info["records"] == 1103
    assert info["unknown_task_records"] == 1103


def test_bad_lines_and_a_malicious_task_pickle_are_reported_not_fatal(capsys, tenset_mini, tmp_path):
    root = _copy(tenset_mini, tmp_path)
    victim = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {victim}",))

    (root / "network_info" / "all_tasks.pkl").write_bytes(pickle.dumps([Evil()]))
    first = sorted((root / "measure_records" / "epyc-zen3").glob("*.json"))[0]
    with open(first, "a") as f:
        f.write('{"i": [["broken\n')
    info = _info_json(capsys, str(root))
    assert not victim.exists()
    assert any("refused to load global" in p for p in info["task_problems"])
    assert info["bad_lines"] == 1
    assert info["bad_line_examples"][0].startswith(f"{first}:97: ")
    assert info["records"] == 1103
    assert info["tasks"] == 32  # the per-network files still name every task


def test_a_record_file_that_cannot_be_read_is_named_not_skipped_silently(capsys, tenset_mini, tmp_path):
    root = _copy(tenset_mini, tmp_path)
    device = root / "measure_records" / "epyc-zen3"
    (device / "([gone],llvm).json").symlink_to(tmp_path / "unmounted" / "records.json")
    (device / "([a-directory],llvm).json").mkdir()
    assert main(["info", str(root), "--json", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["records"] == 1103
    assert f"{device / '([gone],llvm).json'}: a link to nothing (a missing target, or a loop), its records are left out" in err
    assert f"{device / '([a-directory],llvm).json'}: not a regular file" in err


def test_not_a_dataset_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(DatasetError):
        discover(tmp_path)
    assert main(["info", str(tmp_path)]) == 2
    assert "neither tenset nor metaschedule nor metaschedule-runs data" in capsys.readouterr().err


def test_labels_follow_tenset():
    y = task_labels(np.array([2.0, 1.0, 4.0, 1e10]), np.array([True, True, True, False]))
    np.testing.assert_allclose(y, [0.5, 1.0, 0.25, 0.0])
    y = task_labels(np.array([2.0, 1e10]), np.array([True, False]), failed="drop")
    assert y[0] == 1.0 and np.isnan(y[1])
    assert (task_labels(np.array([1e10]), np.array([False])) == 0).all()


def test_task_records_join_and_label(tenset_mini):
    layout = discover(tenset_mini)
    index = load_task_index(layout)
    groups = list(iter_task_records(layout, index))
    assert len(groups) == 13 and all(g.task is not None for g in groups)
    for g in groups:
        y = g.labels()
        assert y.max() == pytest.approx(1.0)
        assert ((y > 0) == np.array([r.ok for r in g.records])).all()
    assert len(list(iter_task_records(layout, index, min_records=48))) == 11
    unmeasured = [g for g in iter_task_records(layout, index, include_unmeasured=True) if g.device == "(unmeasured)"]
    assert len(unmeasured) == 19 and all(g.task is not None for g in unmeasured)


def test_fold_splits_test_every_task_once():
    sizes = [5, 3, 4, 2, 6, 1, 2]
    task = np.repeat(np.arange(7), sizes)
    pos = np.concatenate([np.arange(n) for n in sizes])
    folds = [split_mask(parse_split(f"fold:{i}/3:5"), task, pos, sizes) for i in range(3)]
    assert (np.sum(folds, axis=0) == 1).all()
    assert all(f[task == t].all() or not f[task == t].any() for f in folds for t in range(7))
    assert sorted(len(set(task[f])) for f in folds) == [2, 2, 3]
    other_seed = [split_mask(parse_split(f"fold:{i}/3:6"), task, pos, sizes) for i in range(3)]
    assert any((a != b).any() for a, b in zip(folds, other_seed))
    assert str(parse_split("fold:1/3:5")) == "fold:1/3:5"
    with pytest.raises(SplitError, match="4 folds of 3 tasks"):
        split_mask(parse_split("fold:0/4"), task[:10], pos[:10], sizes[:3])


def test_splits():
    sizes = [20, 10, 1]
    task = np.repeat(np.arange(3), sizes)
    pos = np.concatenate([np.arange(n) for n in sizes])
    within = split_mask(parse_split("within_task"), task, pos, sizes)
    assert within.tolist() == [True] * 2 + [False] * 18 + [True] + [False] * 9 + [False]
    a = split_mask(parse_split("by_task:0.34:7"), task, pos, sizes)
    b = split_mask(parse_split("by_task:0.34:7"), task, pos, sizes)
    assert (a == b).all() and 0 < len(set(task[a])) < 3
    assert all(a[task == t].all() or not a[task == t].any() for t in range(3))
    nets = [frozenset({"resnet_50", "mlp"}), frozenset({"mlp"}), frozenset()]
    held = split_mask(parse_split("holdout:all_five"), task, pos, sizes, nets)
    assert held.tolist() == [True] * 20 + [False] * 11
    assert parse_split("holdout:all_five").networks == ALL_FIVE
    assert parse_split("holdout:mlp,resnet_18").networks == ("mlp", "resnet_18")
    assert str(SplitSpec("by_task", 0.2, 3)) == "by_task:0.2:3"
    for bad in ("nope", "within_task:2", "holdout", "by_task:x", "fold:3/3", "fold:1", "fold:a/b"):
        with pytest.raises(SplitError):
            parse_split(bad)
