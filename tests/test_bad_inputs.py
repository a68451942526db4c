"""Every class of bad input ends in a one-line error naming the file (exit 2), or in a report that
locates what was skipped while every good record is kept; never in a traceback."""

import errno
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

import badinputs as bi
from conftest import REPO
from pruner_offline.cli import main
from pruner_offline.errors import dumps
from pruner_offline.sources.metaschedule import read_ms_records
from pruner_offline.store.reader import FeatureStore
from pruner_offline.tenset.records import BadLine, Record, read_records
from pruner_offline.training.export import export_model, load_model
from pruner_offline.training.module import TrainingDiverged
from pruner_offline.training.run import pretrain
from synthetic import synthetic_store


def cli(capsys, *argv):
    """(exit code, stdout, the one error line) of one in-process run."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    # warnings (e.g. the synthetic stores' feature schema, which pretrain points out) are not errors
    errors = [line for line in err.splitlines()
              if line.startswith("pruner-train:") and not line.startswith("pruner-train: warning:")]
    assert len(errors) == (code != 0), err
    return code, out, errors[0] if errors else ""


def usage_error(capsys, *argv) -> str:
    """argparse's complaint about one argument (exit 2, before any work)."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    assert exc.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return synthetic_store(tmp_path_factory.mktemp("syn") / "s.h5", n_tasks=4, per_task=40)


@pytest.fixture(scope="module")
def trained(store, tmp_path_factory):
    """A draft model file and the run directory that made it (its last.ckpt)."""
    out = tmp_path_factory.mktemp("run")
    r = pretrain(store, "draft", "within_task", out, max_epochs=1, feature_schema="synthetic-1", progress=False)
    return r.model_file, out


# -- record files

def test_a_damaged_gzip_stream_keeps_the_lines_before_the_damage(tenset_mini, tmp_path, capsys):
    src = max((tenset_mini / "measure_records" / "epyc-zen3").glob("*.json"), key=lambda p: p.stat().st_size)
    lines = bi.lines_of(src)
    gz = bi.damaged_gzip(lines, tmp_path / "damaged.json.gz", keep=80)
    items = list(read_records(gz))
    assert isinstance(items[-1], BadLine) and all(isinstance(i, Record) for i in items[:-1])
    kept = len(items) - 1
    assert kept >= 60, "most lines before the damage are kept"
    assert [r.costs for r in items[:-1]] == [r.costs for r in list(read_records(src))[:kept]]
    assert items[-1].source.line == kept + 1 and f"after line {kept}" in items[-1].reason
    ds = bi.dataset(tenset_mini, tmp_path / "ds", {})
    shutil.copy(gz, ds / "measure_records" / "dev" / gz.name)
    code, out, _ = cli(capsys, "info", ds, "--quiet", "--json")
    summary = json.loads(out.splitlines()[-1])
    assert code == 0 and summary["records"] == kept and summary["bad_lines"] == 1
    assert summary["bad_line_examples"][0].startswith(f"{ds}/measure_records/dev/damaged.json.gz:{kept + 1}: ")


def test_a_line_starting_with_a_tab_is_a_record_as_in_ansor(tenset_mini, tmp_path):
    lines = bi.lines_of(bi.pool_files(tenset_mini)[0])
    path = tmp_path / "r.json"
    path.write_text("# comment\n" + " indented comment\n" + "\t" + lines[0] + "\t \n\r\n" + "".join(lines[1:]))
    items = list(read_records(path))
    assert all(isinstance(i, Record) for i in items) and len(items) == len(lines)
    assert items[0].source.line == 3


def test_hostile_record_files_keep_every_good_record_and_say_where_the_bad_ones_are(tenset_mini, tmp_path, capsys):
    a, b = (bi.lines_of(p) for p in bi.pool_files(tenset_mini))
    hostile = list(a)
    hostile[0] = bi.with_key(a[0], '["0123456789abcdef0123456789abcdef", [1, 2]]')  # a first line of another task
    hostile[2] = "\t" + a[2]
    hostile[4] = bi.with_result(a[4], [-1.0])
    hostile[5] = bi.with_result(a[5], [])
    hostile[6] = bi.with_result(a[6], [0])
    hostile[8] = a[8][: len(a[8]) // 2] + "\n"
    negative = [bi.with_result(line, [-1e-3 * (i + 1)]) for i, line in enumerate(b)]
    ds = bi.dataset(tenset_mini, tmp_path / "ds", {"a.json": hostile, "b.json": negative})
    out = tmp_path / "s.h5"
    code, text, _ = cli(capsys, "featurize", ds, "--out", out, "--quiet")
    assert code == 0
    report = json.loads(text.splitlines()[-1])
    assert report["bad_lines"] == 1 and report["failed"] == 4 + len(b)
    assert report["replayed"] == len(a) - 5
    assert report["failure_reasons"] == {"other task": 1, "bad costs": 3 + len(b)}
    assert "measure_records/dev/a.json:9: unreadable line: truncated line" in text
    own_key = json.dumps(json.loads(json.loads(a[0])["i"][0][0]))
    assert (f"measure_records/dev/a.json:1: other task: workload key [\"0123456789abcdef0123456789abcdef\", [1, 2]] "
            f"is not the file's {own_key}") in text
    assert "measure_records/dev/a.json:5: bad costs" in text
    data = FeatureStore(out).load()
    assert sorted(data.records["line"]) == [n for n in range(1, len(a) + 1) if n not in (1, 5, 6, 7, 9)]
    ok = data.records["error_no"] == 0
    assert (data.records["label"][ok] > 0).all() and data.records["label"].max() == pytest.approx(1.0)
    failures = FeatureStore(out).failures()
    assert sum(f[0].endswith("b.json") and f[2].startswith("bad costs") for f in failures) == len(b)


def test_info_and_featurize_agree_on_records_with_negative_zero_and_non_finite_costs(tenset_mini, tmp_path, capsys):
    a = bi.lines_of(bi.pool_files(tenset_mini)[0])
    costs = {1: [-1e-3], 2: [0], 3: [0.0, 1e-3], 4: [], 5: [float("inf")], 6: [1e-3, float("nan")]}
    lines = [bi.with_result(line, costs[i]) if i in costs else line for i, line in enumerate(a)]
    lines[7] = bi.with_result(a[7], [1e10], error_no=4)  # a failure, which both count as one
    ds = bi.dataset(tenset_mini, tmp_path / "ds", {"a.json": lines})
    code, text, _ = cli(capsys, "info", ds, "--json", "--quiet")
    assert code == 0
    info = json.loads(text.splitlines()[-1])
    code, text, _ = cli(capsys, "featurize", ds, "--out", tmp_path / "s.h5", "--quiet")
    assert code == 0
    feat = json.loads(text.splitlines()[-1])
    # json writes inf and nan as Infinity and NaN, which the record reader refuses as unreadable lines
    assert info["bad_lines"] == feat["bad_lines"] == 2
    assert info["rejected_records"] == feat["failure_reasons"]["bad costs"] == 4
    assert info["records"] == feat["records"] == len(a) - 2
    assert info["failed_records"] == 1
    assert info["records"] - info["rejected_records"] == feat["replayed"]
    assert all(":" in e and "bad costs" in e for e in info["rejected_examples"])


def test_non_finite_features_are_a_located_failure_at_featurize_time(tenset_mini, tmp_path, capsys, monkeypatch):
    import pruner_offline.features.extract as extract

    real = extract.featurize_prim_func
    calls = []

    def nan_for_the_third_program(*args, **kwargs):
        feats = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 3:
            feats.statements[0, 0] = np.nan
        return feats

    monkeypatch.setattr(extract, "featurize_prim_func", nan_for_the_third_program)
    lines = bi.lines_of(bi.pool_files(tenset_mini)[0])
    ds = bi.dataset(tenset_mini, tmp_path / "ds", {"a.json": lines})
    code, text, _ = cli(capsys, "featurize", ds, "--out", tmp_path / "s.h5", "--quiet")
    assert code == 0 and "measure_records/dev/a.json:3: features: not finite" in text
    data = FeatureStore(tmp_path / "s.h5").load()
    assert data.n_records == len(lines) - 1 and 3 not in data.records["line"]


def test_a_metaschedule_line_nested_thousands_deep_is_a_bad_line(tmp_path):
    db = bi.metaschedule_db(tmp_path / "db", ['["123", "AAAA"]'],
                            [bi.ms_record(0, [1e-3]), bi.deeply_nested(100_000), bi.ms_record(0, [2e-3])])
    items = list(read_ms_records(db))
    assert [type(i).__name__ for i in items] == ["MSRecordLine", "BadLine", "MSRecordLine"]
    assert items[1].source.line == 2 and "RecursionError" in items[1].reason


def test_a_metaschedule_database_with_no_workloads_is_refused(tmp_path, capsys):
    db = bi.metaschedule_db(tmp_path / "db", [], [bi.ms_record(0, [1e-3]), bi.ms_record(0, [2e-3])])
    code, _, error = cli(capsys, "featurize", db, "--out", tmp_path / "s.h5", "--quiet")
    assert code == 2 and f"{db}/database_workload.json: holds no workloads" in error
    assert not (tmp_path / "s.h5").exists()


def test_info_on_a_metaschedule_database_counts_its_records(tmp_path, capsys):
    """It used to report "records 0, unreadable lines 1837" for a valid database."""
    db = bi.metaschedule_db(tmp_path / "db", ['["123", "AAAA"]'],
                            [bi.ms_record(0, [1e-3]), bi.ms_record(0, [2e-3]), "[0, not json"])
    code, text, _ = cli(capsys, "info", db, "--json")
    summary = json.loads(text.strip().splitlines()[-1])
    assert code == 0 and (summary["workloads"], summary["records"], summary["bad_lines"]) == (1, 2, 1)
    assert summary["bad_line_examples"][0].endswith("database_tuning_record.json:3: bad tuning record: "
                                                    "JSONDecodeError: Expecting value: line 1 column 5 (char 4)")


# -- featurize settings and outputs

def test_featurize_refuses_what_would_give_an_empty_or_unusable_store(tenset_mini, tmp_path, capsys):
    ds = bi.dataset(tenset_mini, tmp_path / "ds", {"a.json": bi.lines_of(bi.pool_files(tenset_mini)[0])})
    out = tmp_path / "s.h5"
    code, _, error = cli(capsys, "featurize", ds, "--out", out, "--device", "nosuchdevice", "--quiet")
    assert code == 2 and "no records of device 'nosuchdevice' (measure_records/ has: dev)" in error
    code, _, error = cli(capsys, "featurize", ds, "--out", out, "--cpu", "nosuchcpu", "--quiet")
    assert code == 2 and "unknown device 'nosuchcpu'" in error
    (tmp_path / "dir.h5").mkdir()
    code, _, error = cli(capsys, "featurize", ds, "--out", tmp_path / "dir.h5", "--quiet")
    assert code == 2 and f"{tmp_path / 'dir.h5'}: is a directory" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.h5", "ds"], "refused before any work"


def test_a_full_disk_leaves_nothing_behind_and_damaged_parts_are_refused_on_resume(tenset_mini, tmp_path, capsys,
                                                                                     monkeypatch):
    ds = bi.dataset(tenset_mini, tmp_path / "ds", {f"{i}.json": bi.lines_of(p)
                                                   for i, p in enumerate(bi.pool_files(tenset_mini))})
    fresh = tmp_path / "fresh.h5"
    assert cli(capsys, "featurize", ds, "--out", fresh, "--quiet")[0] == 0
    out = tmp_path / "s.h5"
    parts = tmp_path / "s.h5.parts"
    import pruner_offline.store.parts as parts_module

    real_savez, calls = np.savez, []

    def savez_on_a_disk_with_room_for_one_part(f, **arrays):
        calls.append(1)
        if len(calls) > 1:
            f.write(b"PK\x03\x04 half a zip")
            raise OSError(errno.ENOSPC, "No space left on device")
        real_savez(f, **arrays)

    monkeypatch.setattr(parts_module.np, "savez", savez_on_a_disk_with_room_for_one_part)
    code, _, error = cli(capsys, "featurize", ds, "--out", out, "--quiet")
    monkeypatch.undo()
    assert code == 2 and error == f"pruner-train: {parts / '0000001.npz'}: No space left on device"
    assert sorted(p.name for p in parts.iterdir()) == ["0000000.npz", "manifest.json"] and not out.exists()

    good = (parts / "0000000.npz").read_bytes()
    shutil.copy(parts / "0000000.npz", parts / "0000001.npz")  # a part copied over another
    code, _, error = cli(capsys, "featurize", ds, "--out", out, "--quiet")
    assert code == 2 and f"{parts / '0000001.npz'}: holds part 0 (measure_records/dev/0.json), not 0000001.npz" in error
    for damaged in (good[: len(good) // 2], b""):
        (parts / "0000001.npz").write_bytes(damaged)
        code, _, error = cli(capsys, "featurize", ds, "--out", out, "--quiet")
        assert code == 2 and f"{parts / '0000001.npz'}: unreadable part" in error and "delete it" in error
    with np.load(parts / "0000000.npz") as z:
        arrays = {k: z[k] for k in z.files}
    as_part_1 = np.array(str(arrays["meta"]).replace('"index": 0', '"index": 1'))
    statements = arrays["statements"].copy()
    statements[0, 0] = np.nan
    # text labels crashed the store's writer; the others were written into the store
    for change, said in (({"label": arrays["label"].astype("U8")}, "label: <U8 values, expected numbers"),
                         ({"statements": statements}, "statements: values that are not finite"),
                         ({"line": arrays["line"] - 1000}, "line: values below 1"),
                         ({"symbols": arrays["symbols"][:-1]}, "symbols: ")):
        with open(parts / "0000001.npz", "wb") as f:
            np.savez(f, **{**arrays, "meta": as_part_1, **change})
        code, _, error = cli(capsys, "featurize", ds, "--out", out, "--quiet")
        assert code == 2 and f"{parts / '0000001.npz'}: {said}" in error, error
    (parts / "0000001.npz").unlink()
    manifest = (parts / "manifest.json").read_bytes()
    (parts / "manifest.json").write_bytes(manifest[:10])
    code, _, error = cli(capsys, "featurize", ds, "--out", out, "--quiet")
    assert code == 2 and f"{parts / 'manifest.json'}: unreadable" in error
    (parts / "manifest.json").write_bytes(manifest)
    assert cli(capsys, "featurize", ds, "--out", out, "--quiet")[0] == 0
    a, b = FeatureStore(fresh).load(), FeatureStore(out).load()
    assert a.file_paths == b.file_paths
    for k in a.records:
        np.testing.assert_array_equal(a.records[k], b.records[k])
    np.testing.assert_array_equal(a.statements, b.statements)


# -- feature stores

def test_the_row_shapes_a_store_is_checked_against_are_the_featurizers():
    from pruner_offline.features import DATAFLOW_COLUMNS, DATAFLOW_TOKENS, STATEMENT_COLUMNS, SYMBOL_COLUMNS
    from pruner_offline.store.schema import ROW_SHAPES

    assert ROW_SHAPES["statements"] == (len(STATEMENT_COLUMNS),) and ROW_SHAPES["symbols"] == (len(SYMBOL_COLUMNS),)
    assert ROW_SHAPES["dataflow"] == (len(DATAFLOW_TOKENS), len(DATAFLOW_COLUMNS))


@pytest.mark.parametrize("damage", sorted(bi.STORE_DAMAGE))
def test_a_store_with_wrong_contents_is_refused_naming_the_array(damage, store, trained, tmp_path, capsys):
    how, array = bi.STORE_DAMAGE[damage]
    bad = bi.damaged_store(store, tmp_path / "bad.h5", how)
    code, _, error = cli(capsys, "evaluate", "--data", bad, "--checkpoint", trained[0], "--out", tmp_path, "--quiet")
    assert code == 2 and error.startswith(f"pruner-train: {bad}") and array in error, error


def test_a_store_without_records_is_refused_saying_why(trained, tmp_path, capsys):
    empty = bi.store_without_records(tmp_path / "empty.h5", [])
    code, _, error = cli(capsys, "evaluate", "--data", empty, "--checkpoint", trained[0], "--quiet")
    assert code == 2 and f"{empty}: the split 'all' leaves no labelled test records" in error
    failed = bi.store_without_records(tmp_path / "failed.h5", [(1, "replay: boom"), (2, "replay: boom")])
    code, _, error = cli(capsys, "pretrain", "--data", failed, "--model", "draft", "--out", tmp_path / "run",
                         "--max-epochs", "1", "--quiet")
    assert code == 2 and "(the store holds 0 records; featurizing failed on 2 records, e.g. t.json:1: replay: boom)" in error
    assert not (tmp_path / "run" / "draft.pt").exists()
    code, _, error = cli(capsys, "adapt", "--checkpoint", trained[0], "--target", "llvm", "--records", failed,
                         "--eval-fraction", "0.2", "--out", tmp_path, "--quiet")
    assert code == 2 and f"{failed}: holds no records to adapt with (featurizing failed on 2 records" in error


def test_a_store_of_failed_runs_only_is_refused_not_scored_as_nan(trained, tmp_path, capsys):
    # every record measured, none successfully: evaluate printed NaN metrics (topk 1.0) for "1103
    # labelled records scored" and compare trained on all-zero labels
    store = synthetic_store(tmp_path / "failed.h5", n_tasks=3, per_task=20)
    with h5py.File(store, "r+") as f:
        f["records/label"][...] = 0
        f["records/error_no"][...] = 4
    code, _, error = cli(capsys, "evaluate", "--data", store, "--checkpoint", trained[0], "--quiet")
    assert code == 2 and error == (f"pruner-train: {store}: none of the test records of the split 'all' ran "
                                   "successfully (every one is a failed measurement), so there is nothing to rank")
    code, _, error = cli(capsys, "pretrain", "--data", store, "--model", "draft", "--out", tmp_path / "run",
                         "--max-epochs", "1", "--quiet")
    assert code == 2 and "none of the test records of the split 'within_task' ran successfully" in error
    assert not (tmp_path / "run" / "draft.pt").exists()


# -- model files

@pytest.mark.parametrize("damage", sorted(bi.MODEL_DAMAGE))
def test_a_model_file_with_wrong_contents_is_refused(damage, store, trained, tmp_path, capsys):
    edit, what = bi.MODEL_DAMAGE[damage]
    bad = bi.damaged_model(trained[0], tmp_path / "bad.pt", edit)
    code, _, error = cli(capsys, "evaluate", "--data", store, "--checkpoint", bad, "--out", tmp_path, "--quiet")
    assert code == 2 and error.startswith(f"pruner-train: {bad}") and what in error, error


def test_truncated_and_malicious_model_files_are_refused_without_running_code(store, trained, tmp_path, capsys):
    victim = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    torch.save({"format": "pruner-offline-model/1", "hparams": bi.RunsCode(victim)}, evil)
    for bad in (evil, bi.truncated(trained[0], tmp_path / "cut.pt")):
        code, _, error = cli(capsys, "evaluate", "--data", store, "--checkpoint", bad, "--quiet")
        assert code == 2 and f"{bad}: not a loadable model file" in error
        # torch's own message advises loading with weights_only=False or allowing the global: that
        # is running the file's code, and the user is not told to
        assert "weights_only" not in error and "safe_globals" not in error, error
        assert bad != evil or "would import and call posix.system" in error, error
    assert not victim.exists()


def test_an_unloadable_last_ckpt_is_refused_before_training(store, trained, tmp_path, capsys):
    victim = tmp_path / "pwned"
    ckpt = tmp_path / "draft" / "run" / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    real = trained[1] / "draft" / "run" / "checkpoints" / "last.ckpt"
    for write in (lambda: bi.truncated(real, ckpt), lambda: torch.save({"state_dict": bi.RunsCode(victim)}, ckpt)):
        write()
        code, _, error = cli(capsys, "pretrain", "--data", store, "--model", "draft", "--out", tmp_path,
                             "--max-epochs", "1", "--quiet")
        assert code == 2 and f"{ckpt}: cannot resume from it" in error and "delete it" in error
    assert not victim.exists() and not (tmp_path / "draft.pt").exists()


@pytest.mark.parametrize("recipe, said", [("model:\n  correction_scale: 2.0\n", "model.correction_scale must be in [0, 1]"),
                                          ("model:\n  lr: -1\n", "model.lr must be above 0"),
                                          ("model:\n  loss: hinge\n", "model.loss: unknown loss 'hinge'")])
def test_a_recipe_value_out_of_range_is_the_users_to_fix_not_a_crash(recipe, said, store, tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text(recipe)
    code, _, error = cli(capsys, "pretrain", "--data", store, "--model", "pacm", "--out", tmp_path / "run",
                         "--config", config, "--quiet")
    assert code == 2 and said in error and "internal error" not in error, error


@pytest.mark.parametrize("text, said", [('{"model":\n  lr: 1}\n', "bad.yaml:2: not a YAML recipe (column 5: "),
                                        ("- model\n", "bad.yaml: a recipe is a YAML mapping of sections"),
                                        ("", "bad.yaml: a recipe is a YAML mapping of sections (model:, data:, "
                                             "trainer:), not an empty file"),
                                        (None, "bad.yaml: cannot read the recipe (No such file"),
                                        ("model:\n  nosuchkey: 3\n", "recipe: Group 'model' does not accept option 'nosuchkey'"),
                                        ("trainer:\n  max_epochs: many\n", 'recipe: Parser key "trainer.max_epochs"')])
def test_a_recipe_file_it_cannot_use_is_named_in_one_line(text, said, store, tmp_path, capsys):
    """LightningCLI answers each of these with ~60 lines of usage text and exit 2 (a SystemExit
    here), a YAML error naming no file."""
    config = tmp_path / "bad.yaml"
    if text is not None:
        config.write_text(text)
    code, _, error = cli(capsys, "pretrain", "--data", store, "--model", "draft", "--out", tmp_path / "run",
                         "--config", config, "--quiet")
    assert code == 2 and said in error, error
    assert not (tmp_path / "run" / "draft.pt").exists()


def test_training_that_diverges_writes_no_model(store, tmp_path, capsys):
    config = tmp_path / "explode.yaml"
    config.write_text("model:\n  lr: 1.0e+30\n")
    code, _, error = cli(capsys, "pretrain", "--data", store, "--model", "draft", "--out", tmp_path / "run",
                         "--max-epochs", "2", "--config", config, "--quiet")
    # the first epoch's steps leave finite but huge weights: the validation after it is where the
    # loss first turns NaN
    assert code == 2 and "training diverged: the draft validation loss is nan at epoch 0" in error
    assert not (tmp_path / "run" / "draft.pt").exists()


def test_export_refuses_non_finite_weights(trained, tmp_path):
    module, _ = load_model(trained[0])
    with torch.no_grad():
        next(module.parameters()).fill_(math.nan)
    with pytest.raises(TrainingDiverged, match="not written"):
        export_model(module, tmp_path / "m.pt")
    assert list(tmp_path.iterdir()) == []


def test_adapt_follow_refuses_a_state_file_it_cannot_resume_from(tenset_mini, tmp_path, capsys):
    victim = tmp_path / "pwned"
    save = tmp_path / "adapted.pt"
    state = tmp_path / "adapted.pt.state"
    torch.save({"format": "pruner-offline-adapt-state/1", "states": bi.RunsCode(victim)}, state)
    records = tmp_path / "live.json"
    records.write_text("".join(bi.lines_of(bi.pool_files(tenset_mini)[0])[:3]))
    code, _, error = cli(capsys, "adapt", "--checkpoint", bi.BUNDLED_PACM, "--target", "llvm", "--records", records,
                         "--follow", "--tasks", tenset_mini, "--save", save, "--idle-timeout", "0.1", "--quiet")
    assert code == 2 and f"{state}: cannot resume from it" in error and not victim.exists()


def test_adapt_refuses_a_model_of_another_feature_schema(store, trained, tmp_path, capsys):
    other = bi.damaged_model(trained[0], tmp_path / "other.pt",
                             lambda o: {**o, "hparams": {**o["hparams"], "feature_schema": "0"}})
    code, _, error = cli(capsys, "adapt", "--checkpoint", other, "--target", "llvm", "--records", store,
                         "--out", tmp_path, "--quiet")
    assert code == 2 and f"{other} was trained on features of schema '0' but these features are 'synthetic-1'" in error


# -- splits and arguments

@pytest.mark.parametrize("split", ["garbage", "within_task:2.5", "by_task:abc", "within_task:0", "within_task:nan",
                                   "by_task:0.2:-1", "holdout:"])
def test_a_bad_split_is_refused_before_any_work(split, capsys):
    error = usage_error(capsys, "pretrain", "--split", split, "--data", "/nonexistent")
    assert "argument --split" in error and "bad split" in error


def test_holding_out_a_network_the_data_lacks_is_refused(store, trained, tmp_path, capsys):
    code, _, error = cli(capsys, "evaluate", "--data", store, "--checkpoint", trained[0], "--split",
                         "holdout:nosuchnet", "--quiet")
    assert code == 2
    assert f"{store}: bad split holdout:nosuchnet: no task of this data is in nosuchnet (its networks: net)" in error


@pytest.mark.parametrize("argv, option", [
    (["featurize", "d", "--out", "s.h5", "--jobs", "0"], "--jobs"),
    (["pretrain", "--jobs", "-3"], "--jobs"),
    (["pretrain", "--max-epochs", "0"], "--max-epochs"),
    (["compare", "--max-epochs", "-1"], "--max-epochs"),
    (["adapt", "--checkpoint", "m.pt", "--target", "llvm", "--records", "s.h5", "--eval-fraction", "1.5"],
     "--eval-fraction"),
    (["adapt", "--checkpoint", "m.pt", "--target", "llvm", "--records", "s.h5", "--round", "0"], "--round"),
    (["adapt", "--checkpoint", "m.pt", "--target", "llvm", "--records", "s.h5", "--momentum", "nan"], "--momentum"),
    (["tune", "--workload", "matmul", "--work-dir", "w", "--trials", "0"], "--trials"),
    (["tune", "--workload", "matmul", "--work-dir", "w", "--trials", "-1"], "--trials"),
    # larger than a C integer: TVM's FFI failed on it ("Expected `int` but got `ffi.BigInt`")
    (["tune", "--workload", "matmul", "--work-dir", "w", "--population", "99999999999999999999"], "--population"),
    (["pretrain", "--seed", str(2**40)], "--seed"),
    (["tune", "--workload", "matmul", "--work-dir", "w", "--trials", "8", "--verify-fraction", "0"],
     "--verify-fraction"),
])
def test_out_of_range_arguments_are_refused(argv, option, capsys):
    assert f"argument {option}" in usage_error(capsys, *argv)


@pytest.mark.parametrize("flags, said", [(["--strategy", "nosuch"], "--strategy nosuch: You selected an invalid strategy"),
                                         (["--accelerator", "cpu", "--devices", "0"], "--accelerator cpu --devices 0: "),
                                         (["--devices", "abc"], "--devices abc: `devices` selected with")])
def test_trainer_settings_lightning_cannot_use_are_refused_before_featurizing(flags, said, tmp_path, capsys):
    # Lightning raised these from inside its CLI, as a ValueError, a TypeError or its own exception
    code, _, error = cli(capsys, "pretrain", "--model", "mlp", "--out", tmp_path / "run", "--quiet", *flags)
    assert code == 2 and error.startswith(f"pruner-train: {said}"), error
    assert not (tmp_path / "run").exists()


def test_a_missing_data_path_is_an_error_not_a_featurize_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, error = cli(capsys, "pretrain", "--data", tmp_path / "nothing")
    assert code == 2 and f"{tmp_path / 'nothing'}: no such store file or dataset directory" in error
    assert list(tmp_path.iterdir()) == []


# -- what the CLI prints

def test_an_internal_error_is_reported_as_a_bug_with_its_traceback_in_a_log(tenset_mini, tmp_path, capsys,
                                                                             monkeypatch):
    def broken(*args, **kwargs):
        return 1 / 0

    monkeypatch.setattr("pruner_offline.cli.info.summarize", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the log goes
    code, _, error = cli(capsys, "info", tenset_mini, "--quiet")
    assert code == 70 and "internal error (ZeroDivisionError: division by zero): this is a bug" in error
    log = error.split("the traceback is in ")[1].split(",")[0]
    assert log.startswith(str(tmp_path))
    text = open(log).read()
    assert "Traceback" in text and "1 / 0" in text


def test_an_interrupt_is_one_line_and_its_own_exit_code(tenset_mini, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("pruner_offline.cli.info.summarize", interrupted)
    code, _, error = cli(capsys, "info", tenset_mini, "--quiet")
    assert code == 130 and error == "pruner-train: interrupted"


def test_printed_json_is_strict():
    def refuse(name):
        raise ValueError(name)

    assert dumps({"a": math.nan, "b": [math.inf, 1.5], "c": "x"}) == '{"a": null, "b": [null, 1.5], "c": "x"}'
    from pruner_offline.tuning.run.workload import TuneReport

    report = TuneReport("matmul", "llvm", "random", 0, math.inf, [], [], [], 0.0, 0.0, [], 0.0, {}, None, "w")
    assert json.loads(report.to_json(), parse_constant=refuse)["best_latency_s"] is None


def test_our_warnings_are_one_line_for_the_user_and_others_keep_their_source(capsys, monkeypatch):
    import warnings

    import pruner_offline
    from pruner_offline.errors import user_facing_warnings

    ours = str(Path(pruner_offline.__file__).parent / "tuning" / "run.py")
    # pytest records warnings ahead of showwarning, so the hook is called here as warnings calls
    # it; a warning not ours goes on, whole, to the showwarning it replaced
    passed_on = []
    monkeypatch.setattr(warnings, "showwarning", lambda *args: passed_on.append(args))
    with user_facing_warnings():
        warnings.showwarning("the draft score ranks this search with other constants", UserWarning, ours, 63)
        warnings.showwarning("a library's own caution", UserWarning, "/elsewhere/lib.py", 7)
    assert capsys.readouterr().err.splitlines() == [
        "pruner-train: warning: the draft score ranks this search with other constants"]
    assert passed_on == [("a library's own caution", UserWarning, "/elsewhere/lib.py", 7, None, None)]
    assert warnings.showwarning.__name__ == "<lambda>"  # put back as it was


def test_a_record_file_name_that_is_not_utf8_is_refused_before_any_work(tenset_mini, tmp_path, capsys):
    # the store keeps names as UTF-8 text: writing it failed after every file was featurized
    ds = tmp_path / "ds"
    (ds / "measure_records").mkdir(parents=True)
    (ds / "network_info").symlink_to(tenset_mini / "network_info")
    record = sorted((tenset_mini / "measure_records").rglob("*.json"))[0]
    device = os.fsencode(ds / "measure_records") + b"/dev\xff"
    try:
        os.mkdir(device)
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")
    os.symlink(os.fsencode(record), device + b"/" + os.fsencode(record.name))
    code, _, error = cli(capsys, "featurize", ds, "--out", tmp_path / "s.h5", "--quiet")
    assert code == 2 and "dev\\udcff" in error and "is not UTF-8 text" in error, error
    assert not (tmp_path / "s.h5.parts").exists()


def test_an_output_that_is_not_a_regular_file_is_never_replaced(tenset_mini, store, trained, tmp_path, capsys):
    # a rename replaces the node itself: run as root, --out /dev/null made /dev/null a regular file
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv in (["featurize", tenset_mini, "--out", fifo], ["merge", "--out", fifo, store],
                 ["adapt", "--checkpoint", trained[0], "--target", "llvm", "--records", store, "--method", "finetune",
                  "--save", fifo]):
        code, _, error = cli(capsys, *argv, "--quiet") if argv[0] != "merge" else cli(capsys, *argv)
        assert code == 2 and f"{fifo}: exists and is not a regular file" in error, (argv[0], error)
        assert fifo.is_fifo()


def _first_record_with(edit) -> str:
    line = json.loads((REPO / "datasets" / "h200-ms-mini" / "database_tuning_record.json").read_text().splitlines()[0])
    insts, decisions = line[1][0]
    edit(insts, decisions)
    return json.dumps(line)


def _decision_of(kind: str):
    def find(insts, decisions):
        return next(d for d in decisions if insts[d[0]][0] == kind)
    return find


# each of these stopped the process inside TVM's trace replay: SIGFPE or SIGSEGV, no message
NATIVE_CRASHES = {
    "a tile factor of 0": (lambda i, d: _decision_of("SamplePerfectTile")(i, d).__setitem__(1, [1, 0, 1, 64, 1]),
                           "SamplePerfectTile: decision [1, 0, 1, 64, 1] is not [5] factors >= 1"),
    "a null tile decision": (lambda i, d: _decision_of("SamplePerfectTile")(i, d).__setitem__(1, None),
                             "SamplePerfectTile: decision None"),
    "a category out of range": (lambda i, d: _decision_of("SampleCategorical")(i, d).__setitem__(1, 99),
                                "SampleCategorical: decision 99 is not an index below"),
    "a null attribute": (lambda i, d: i[0][2].__setitem__(0, None), "GetSBlock: a null attribute"),
}


@pytest.mark.parametrize("damage", sorted(NATIVE_CRASHES))
def test_a_tuning_record_tvm_would_crash_on_is_a_bad_line(damage, tmp_path):
    edit, said = NATIVE_CRASHES[damage]
    workloads = (REPO / "datasets" / "h200-ms-mini" / "database_workload.json").read_text().splitlines()
    good = _first_record_with(lambda i, d: None)
    db = bi.metaschedule_db(tmp_path / "db", workloads, [good, _first_record_with(edit), good])
    items = list(read_ms_records(db))
    assert [type(i).__name__ for i in items] == ["MSRecordLine", "BadLine", "MSRecordLine"]
    assert items[1].source.line == 2 and said in items[1].reason, items[1].reason


def test_featurize_reports_such_a_record_and_keeps_the_others(tmp_path):
    workloads = (REPO / "datasets" / "h200-ms-mini" / "database_workload.json").read_text().splitlines()
    good = _first_record_with(lambda i, d: None)
    db = bi.metaschedule_db(tmp_path / "db", workloads, [_first_record_with(NATIVE_CRASHES["a tile factor of 0"][0]),
                                                          good])
    # a child process: were the check gone, TVM would take the test process down with it
    done = subprocess.run([sys.executable, "-m", "pruner_offline.cli", "featurize", str(db), "--out",
                           str(tmp_path / "s.h5"), "--jobs", "1", "--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "database_tuning_record.json#workload=0:1: unreadable line: bad tuning record" in done.stdout + done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["records"] == 1


def test_following_a_record_file_that_never_appears_says_so_and_writes_no_model(tenset_mini, tmp_path, capsys):
    # it used to wait out the idle timeout and print the model path as if it had written one
    missing = tmp_path / "tuning.json"
    code, out, error = cli(capsys, "adapt", "--follow", "--checkpoint", REPO / "checkpoints" / "pacm.pt", "--target",
                           "llvm", "--records",
                           missing, "--tasks", tenset_mini, "--save", tmp_path / "m.pt", "--idle-timeout", "1")
    assert code == 2 and f"pruner-train: {missing}: never appeared in 1 s; no model written" in error, error
    assert json.loads(out.strip().splitlines()[-1])["model"] is None and not (tmp_path / "m.pt").exists()


def test_records_whose_task_pickles_are_damaged_say_which_pickle(tenset_mini, tmp_path, capsys):
    # every record said only "no task pickle has this workload key", the damaged pickle unnamed
    ds = tmp_path / "ds"
    (ds / "network_info").mkdir(parents=True)
    for pkl in (tenset_mini / "network_info").glob("*.pkl"):
        (ds / "network_info" / pkl.name).write_bytes(pkl.read_bytes()[:100])
    record = sorted((tenset_mini / "measure_records").rglob("*.json"))[0]
    (ds / "measure_records" / "dev").mkdir(parents=True)
    (ds / "measure_records" / "dev" / record.name).symlink_to(record)
    code, out, error = cli(capsys, "featurize", ds, "--out", tmp_path / "s.h5", "--quiet")
    assert "task pickles could not be read, e.g. " in out + error and "pickle data was truncated" in out + error


def test_a_module_none_of_whose_candidates_builds_is_one_line_and_exit_2(tmp_path):
    # its report of nulls exited 0, and the runner's pool, shut down as Python exited, printed a traceback
    module = tmp_path / "negative.py"
    module.write_text("""# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((-64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""")
    done = subprocess.run([sys.executable, "-m", "pruner_offline.cli", "tune", "--module", str(module), "--cost-model",
                           "random", "--trials", "4", "--trials-per-batch", "4", "--population", "16", "--work-dir",
                           str(tmp_path / "w"), "--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"pruner-train tune: none of the 4 candidates built and ran; MetaSchedule's logs in {tmp_path / 'w' / 'logs'} "
        "say why"]
    assert json.loads(done.stdout.strip().splitlines()[-1])["best_latency_s"] is None
