import json
import os

import numpy as np
import pytest
import torch

from pruner_offline.cli import main
from pruner_offline.training.evaluate import reference_metrics
from pruner_offline.training.export import ModelFileError, load_model
from pruner_offline.training.run import pretrain

from synthetic import synthetic_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return synthetic_store(tmp_path_factory.mktemp("syn") / "s.h5")


def test_pacm_learns_a_ranking_and_resumes(store, tmp_path):
    first = pretrain(store, "pacm", "within_task:0.3", tmp_path, max_epochs=4, feature_schema="synthetic-1",
                     progress=False)
    assert first.epochs == 4
    last = tmp_path / "pacm" / "run" / "checkpoints" / "last.ckpt"
    assert last.is_file()
    # the same command with more epochs continues from last.ckpt instead of starting over
    again = pretrain(store, "pacm", "within_task:0.3", tmp_path, max_epochs=12, feature_schema="synthetic-1",
                     progress=False)
    assert again.epochs == 12
    metrics = again.evaluation.metrics
    rng = np.random.default_rng(0)
    from pruner_offline.training.evaluate import evaluate_predictions, split_data

    dm = split_data(store, "within_task:0.3")
    random = np.mean([evaluate_predictions(rng.random(len(dm.test_rows)), dm, dm.test_rows).metrics["pairwise_acc"]
                      for _ in range(5)])
    assert metrics["pairwise_acc"] > random + 0.15, (metrics, random)
    module, meta = load_model(again.model_file, expect_schema="synthetic-1")
    assert meta["split"] == "within_task:0.3" and meta["test_records"] == len(dm.test_rows)
    # the exported model scores exactly as the trained one did
    pred = module.predict_rows(dm.gather, dm.test_rows)
    assert evaluate_predictions(pred, dm, dm.test_rows).metrics == pytest.approx(metrics)


def test_model_files_are_checked(store, tmp_path):
    r = pretrain(store, "draft", "within_task", tmp_path, max_epochs=1, feature_schema="synthetic-1", progress=False)
    with pytest.raises(ModelFileError, match="schema 'synthetic-1'.*retrain"):
        load_model(r.model_file, expect_schema="2")
    victim = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {victim}",))

    bad = tmp_path / "evil.pt"
    torch.save({"format": "pruner-offline-model/1", "x": Evil()}, bad)
    with pytest.raises(ModelFileError, match="not a loadable model file"):
        load_model(bad)
    assert not victim.exists()
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, other)
    with pytest.raises(ModelFileError, match="not a pruner-offline model file"):
        load_model(other)


def _last_json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_cli_pretrain_evaluate_compare(store, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    assert main(["pretrain", "--data", str(store), "--model", "mlp", "--out", str(out), "--max-epochs", "2",
                 "--quiet", "--json"]) == 0
    captured = capsys.readouterr()
    res = json.loads(captured.out.strip().splitlines()[-1])
    # trained all the same, but said at once: tune would refuse this model only when it is run
    assert (f"pruner-train: warning: {store} holds features of schema 'synthetic-1', this version extracts schema"
            in captured.err)
    ckpt = res["mlp"]["checkpoint"]
    assert ckpt.endswith("mlp.pt") and res["mlp"]["records"] > 0
    assert main(["evaluate", "--checkpoint", ckpt, "--data", str(store), "--json", "--quiet", "--out", str(out)]) == 0
    out_text = capsys.readouterr().out
    ev = json.loads(out_text.strip().splitlines()[-1])
    assert set(ev) >= {"peak@1", "peak@5", "topk@1", "topk@5", "pairwise_acc", "records", "tasks"}
    assert ev["peak@1"] == pytest.approx(res["mlp"]["peak@1"])
    # beside the model, what ranking the same records costs nothing (the synthetic draft score is
    # 1/cost, so it ranks perfectly), and pretrain reported the same on its test split
    ref = ev["reference"]
    assert ref["analytic_draft"]["records"] == ref["random"]["records"] == ev["records"]
    assert ref["analytic_draft"]["peak@1"] == pytest.approx(1.0) and 0 < ref["random"]["peak@1"] < 0.9
    assert res["reference"] == ref
    table = out_text.splitlines()
    assert any(line.startswith("analytic_draft ") for line in table) and any(line.startswith("random ") for line in table)
    assert any(line.startswith("note: mlp ranks") for line in table) == (ev["peak@1"] < ref["analytic_draft"]["peak@1"])
    assert (out / "evaluate_mlp_scatter.png").stat().st_size > 1000
    assert (out / "evaluate_mlp_score_at_k.png").stat().st_size > 1000
    import pruner_offline.training.compare as compare_mod
    import pruner_offline.training.run as run_mod
    made = []

    def counted(*args, **kwargs):
        made.append(1)
        return reference_metrics(*args, **kwargs)

    monkeypatch.setattr(run_mod, "reference_metrics", counted)
    monkeypatch.setattr(compare_mod, "reference_metrics", counted)
    assert main(["compare", "--data", str(store), "--models", "draft", "gbdt", "--out", str(tmp_path / "cmp"),
                 "--max-epochs", "2", "--json", "--quiet"]) == 0
    table = _last_json(capsys)
    assert set(table) == {"draft", "gbdt", "reference"}
    # two models tested on one split: the reference rows are made once, and are evaluate's
    assert len(made) == 1 and table["reference"] == ref
    assert all({"peak@1", "topk@5", "train_seconds"} <= set(table[m]) for m in ("draft", "gbdt"))


def test_a_model_the_draft_score_beats_is_named():
    from pruner_offline.training.evaluate import below_the_draft

    reference = {"analytic_draft": {"peak@1": 0.672}, "random": {"peak@1": 0.49}}
    note = below_the_draft("pacm", {"peak@1": 0.581}, reference)
    assert note.startswith("note: pacm ranks these records below the analytic draft score") and "0.581 < 0.672" in note
    assert below_the_draft("pacm", {"peak@1": 0.672}, reference) == ""


def test_gbdt_is_saved_without_pickle_and_scores_as_trained(store, tmp_path, capsys):
    from pruner_offline.training.compare import train_gbdt

    result = train_gbdt(store, "within_task:0.3", 0, tmp_path)
    metrics, model_file = result.evaluation.to_json(), result.model_file
    raw = torch.load(model_file, weights_only=True)  # plain tensors and values: no pickle needed
    assert raw["format"] == "pruner-offline-gbdt/1" and raw["trees"]["roots"].numel() > 1
    module, meta = load_model(model_file)
    assert meta["split"] == "within_task:0.3" and module.hparams.model == "gbdt"
    # the same file scores a store exactly as the fitted trees did
    assert main(["evaluate", "--checkpoint", str(model_file), "--data", str(store), "--json", "--quiet",
                 "--out", str(tmp_path)]) == 0
    ev = _last_json(capsys)
    assert ev["split"] == "within_task:0.3" and ev["peak@1"] == pytest.approx(metrics["peak@1"])
    raw["trees"]["left"][0] = 10 ** 9  # a damaged file is refused, not followed off the end
    torch.save(raw, tmp_path / "bad.pt")
    with pytest.raises(ModelFileError, match="damaged gradient-boosted trees"):
        load_model(tmp_path / "bad.pt")


def test_a_learning_curve_point_trains_on_a_seeded_sample_of_the_training_records(store):
    from pruner_offline.errors import BadInput
    from pruner_offline.training.data import StoreDataModule

    def split(**kw):
        dm = StoreDataModule(str(store), split="fold:0/4:1", **kw)
        dm.setup("fit")
        return dm

    whole, small, again = split(), split(max_train_records=50), split(max_train_records=50)
    assert len(whole.train_rows) > 50 and len(small.train_rows) == 50
    assert set(small.train_rows) <= set(whole.train_rows) and list(small.train_rows) == list(again.train_rows)
    # what is scored and validated on does not change with the training sample
    assert list(small.test_rows) == list(whole.test_rows) and list(small.val_rows) == list(whole.val_rows)
    assert len(split(max_train_records=10 ** 6).train_rows) == len(whole.train_rows)
    with pytest.raises(BadInput, match="max_train_records"):
        StoreDataModule(str(store), max_train_records=0)


def test_validation_by_task_holds_whole_training_tasks(store):
    from pruner_offline.training.data import StoreDataModule

    def split(**kw):
        dm = StoreDataModule(str(store), split="fold:0/4:1", **kw)
        dm.setup("fit")
        return dm

    by_records, by_task = split(), split(val_by_task=True, val_fraction=0.25)
    test, val, train = (set(by_task.columns(r)["task_id"]) for r in (by_task.test_rows, by_task.val_rows,
                                                                       by_task.train_rows))
    assert val and train and not (val & train) and not (val & test) and not (train & test)
    # the same records learn or validate either way; only how they are cut differs
    assert sorted(np.concatenate([by_task.val_rows, by_task.train_rows])) == \
        sorted(np.concatenate([by_records.val_rows, by_records.train_rows]))
    assert set(by_records.columns(by_records.val_rows)["task_id"]) & \
        set(by_records.columns(by_records.train_rows)["task_id"])
