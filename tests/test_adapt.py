import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import copy

import numpy as np
import pytest
import torch

from pruner_offline.adapt.methods import AdaptConfig, make_method
from pruner_offline.adapt.online import OnlineRecords, programs_of_store
from pruner_offline.adapt.simulate import held_out_rows, heldout_scores, simulate, tuning_order
from pruner_offline.build_store import FeaturizeSettings, cached_store
from pruner_offline.cli import main
from pruner_offline.models.metrics import pairwise_accuracy
from pruner_offline.store.reader import FeatureStore
from pruner_offline.training.data import gather_batch
from pruner_offline.training.export import load_model, trained_on_other_kinds
from pruner_offline.training.run import pretrain

from conftest import REPO
from synthetic import synthetic_store


def _no_prior(root):
    """The earlier recipe (one-list LambdaRank, no draft prior). These tests flip devices
    so that the analytic draft score ranks them exactly wrong; with the prior (weight 16) a few
    retrain steps at lr 7e-4 cannot overturn it, which is what the flip is not meant to test."""
    path = root / "no_prior.yaml"
    path.write_text("model:\n  draft_prior: false\n  loss: lambdarank\n")
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapt")
    store = synthetic_store(root / "s.h5", n_tasks=4, per_task=80, seed=3)
    r = pretrain(store, "pacm", "within_task", root / "pre", max_epochs=2, feature_schema="synthetic-1",
                 progress=False, extra_configs=[_no_prior(root)])
    return store, r.model_file


def test_moa_moves_the_momentum_copy_by_one_minus_m(setup):
    store, model_file = setup
    module, _ = load_model(model_file)
    d = FeatureStore(store).load()
    cfg = AdaptConfig(momentum=0.9, round_size=10, retrain_every=2, epochs=2)
    moa = make_method("moa", module, cfg)
    before = [p.detach().clone() for p in moa.momentum.parameters()]
    online = OnlineRecords()
    for i, p in enumerate(programs_of_store(d, tuning_order(d)[:20])):
        online.add(p)
    assert not moa.after_round(online, 1)  # not a retrain round
    assert moa.after_round(online, 2)
    for old, slow, fast in zip(before, moa.momentum.parameters(), moa.predictor.parameters()):
        torch.testing.assert_close(slow, 0.9 * old + 0.1 * fast)
    assert any(not torch.equal(o, f) for o, f in zip(before, moa.predictor.parameters()))
    # labels of the online set are per task, relative to the best seen so far
    y = online.data().records["label"]
    t = online.data().records["task_id"]
    assert all(y[t == k].max() == pytest.approx(1.0) for k in np.unique(t))


def test_weight_mixes_end_at_both_models(setup):
    from pruner_offline.adapt.methods import mixed

    module, _ = load_model(setup[1])
    other = copy.deepcopy(module)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    for w, expect in ((0.0, module), (1.0, other)):
        got = mixed(module, other, w)
        assert all(torch.equal(a, b) for a, b in zip(got.state_dict().values(), expect.state_dict().values()))
    half = mixed(module, other, 0.5)
    p0, p1, ph = (next(m.parameters()) for m in (module, other, half))
    torch.testing.assert_close(ph, (p0 + p1) / 2)
    reused = mixed(module, other, 0.5, out=got)  # got holds `other`'s weights, which are replaced
    assert reused is got
    assert all(torch.equal(a, b) for a, b in zip(reused.state_dict().values(), half.state_dict().values()))


def test_a_model_trained_on_the_device_scores_its_correction_whole(setup, tmp_path):
    from pruner_offline.adapt.methods import mixed, train_online
    from pruner_offline.training.export import export_model

    store, _ = setup
    # the shipped recipe: PaCM with the prior, scoring unseen workloads with a quarter of its correction
    r = pretrain(store, "pacm", "within_task", tmp_path / "pre", max_epochs=1, feature_schema="synthetic-1",
                 progress=False)
    module, _ = load_model(r.model_file)
    assert module.hparams.correction_scale == 0.25 and float(module.correction_scale) == 0.25
    d = FeatureStore(store).load()
    online = OnlineRecords()
    for p in programs_of_store(d, tuning_order(d)[:40]):
        online.add(p)
    cfg = AdaptConfig(round_size=10, retrain_every=2, epochs=1)
    tuned = copy.deepcopy(module)
    train_online(tuned, online, cfg, 0)
    assert float(tuned.correction_scale) == 1.0 and float(module.correction_scale) == 0.25
    assert float(mixed(module, tuned, 0.5).correction_scale) == pytest.approx(0.625)
    assert float(load_model(export_model(tuned, tmp_path / "tuned.pt"))[0].correction_scale) == 1.0
    # a restart (adapt --follow's state file) resumes with the scale the predictor had
    finetune = make_method("finetune", module, cfg)
    assert finetune.after_round(online, 2)
    resumed = make_method("finetune", module, cfg)
    resumed.load_state(finetune.state())
    assert float(resumed.predictor.correction_scale) == 1.0


@pytest.fixture(scope="module")
def h200_store(tmp_path_factory):
    """The bundled real H200 records, featurized with the H200 constants."""
    root = tmp_path_factory.mktemp("h200_store")
    return cached_store(FeaturizeSettings(str(REPO / "datasets" / "h200-ms-mini"), gpu="h200"), root / "cache")[0]


@pytest.fixture(scope="module")
def h200_mini(tmp_path_factory, h200_store):
    """PaCM pretrained on the bundled real H200 records, and those records as a tuning stream."""
    root = tmp_path_factory.mktemp("h200")
    store = h200_store
    r = pretrain(store, "pacm", "within_task", root / "pre", max_epochs=15, progress=False,
                 feature_schema=str(FeatureStore(store).meta.get("feature_schema", "")),
                 extra_configs=[_no_prior(root)])
    return load_model(r.model_file)[0], FeatureStore(store).load()


def _replay(method, programs, cfg) -> list[str]:
    """Feed the programs round by round; guarded's chosen candidate after each round."""
    online = OnlineRecords()
    mixes = []
    for r, start in enumerate(range(0, len(programs), cfg.round_size), 1):
        for p in programs[start:start + cfg.round_size]:
            online.add(p)
        method.after_round(online, r)
        mixes.append(method.chosen)
    return mixes


def _flipped(programs):
    """The same programs on a device that ranks them the other way round."""
    return [dataclasses.replace(p, cost=1.0 / p.cost) for p in programs]


def test_guarded_moves_only_when_unseen_records_disagree_with_pretraining(h200_mini):
    """Real H200 programs, pretrained on. Measured as pretraining knew them, the tuned copy never
    ranks the records it had not seen clearly better: guarded keeps the pretrained model. Measured
    on a device that ranks them the other way round, the pretrained model ranks the first records
    worse than a coin, so guarded leaves it at the first retrain, and ends on a candidate that ranks
    held-out records of that device better."""
    module, d = h200_mini
    held = held_out_rows(d, 0.25)
    order = tuning_order(d)
    stream = programs_of_store(d, order[~held[order]])
    cfg = AdaptConfig(retrain_every=2, epochs=10)
    same = make_method("guarded", module, cfg)
    assert set(_replay(same, stream, cfg)) == {"pretrained"}
    assert all(torch.equal(a, b) for a, b in zip(same.predictor.state_dict().values(), module.state_dict().values()))
    assert same.retrains == len(stream) // 20 and same.gains.shape[1] > 0  # it did retrain and judge

    flipped = make_method("guarded", module, cfg)
    mixes = _replay(flipped, _flipped(stream), cfg)
    assert mixes[:2] == ["pretrained", "finetune"]  # no candidate before the first retrain, then no guard
    assert mixes[-1] != "pretrained"
    test = OnlineRecords(_flipped(programs_of_store(d, np.flatnonzero(held)))).data()
    rows = np.arange(len(test.records["label"]))
    acc = {name: pairwise_accuracy(m.predict_rows(lambda r: gather_batch(test, r), rows), test.records["label"],
                                   test.records["task_id"])
           for name, m in (("pretrained", module), ("guarded", flipped.predictor))}
    assert acc["guarded"] > acc["pretrained"] + 0.2, acc


def test_guarded_judges_only_records_its_tuned_copy_never_saw(h200_mini, tmp_path):
    module, d = h200_mini
    programs = programs_of_store(d, tuning_order(d)[:40])  # a device the pretrained model knows
    cfg = AdaptConfig(retrain_every=2, epochs=2)
    g = make_method("guarded", module, cfg)
    online = OnlineRecords(programs[:20])
    g.after_round(online, 2)  # a retrain on all 20: nothing new to judge yet
    assert g.retrains == 1 and g.gains.shape[1] == 0 and g.scored == 20
    online = OnlineRecords(programs[:30])
    g.after_round(online, 3)  # judged: the 10 new records only (those with a good pair)
    assert 0 < g.gains.shape[1] <= 10 and g.scored == 30
    # a restart (adapt --follow) resumes with the same tally and tuned copy
    torch.save(g.state(), tmp_path / "s.pt")
    again = make_method("guarded", module, cfg)
    again.load_state(torch.load(tmp_path / "s.pt", weights_only=True))
    np.testing.assert_array_equal(again.gains, g.gains)
    online = OnlineRecords(programs)
    assert g.after_round(online, 4) == again.after_round(online, 4)
    assert (g.weight, g.moved, g.uninformed) == (again.weight, again.moved, again.uninformed)
    assert not g.uninformed
    for a, b in zip(g.predictor.state_dict().values(), again.predictor.state_dict().values()):
        torch.testing.assert_close(a, b)


def test_guard_lifts_only_when_a_candidate_clears_the_bar():
    """The pretrained model is left only once some candidate's mean gain over it is `evidence`
    standard errors above 0, even when a candidate leads short of that."""
    from pruner_offline.adapt.methods import CANDIDATES, guard_lifted

    rng = np.random.default_rng(0)
    noise = rng.standard_normal(40)
    noise = (noise - noise.mean()) / noise.std(ddof=1)  # mean 0, std 1: standard error 1/sqrt(40)
    se = 1 / np.sqrt(40)
    gains = np.zeros((len(CANDIDATES) - 1, 40))
    gains[1] = 1.5 * se + noise  # 1.5 standard errors: short of a bar of 2
    gains[3] = 0.5 * se + noise
    assert not guard_lifted(gains, evidence=2.0, min_records=10)
    assert guard_lifted(gains, evidence=1.0, min_records=10)
    assert not guard_lifted(gains[:, :5], evidence=0.0, min_records=10)  # too few judged
    gains[4] = 2.5 * se + noise  # the running fine-tune clears it
    assert guard_lifted(gains, evidence=2.0, min_records=10)
    assert not guard_lifted(-np.abs(gains), evidence=0.0, min_records=10)


def test_guarded_once_moved_predicts_a_mix_that_grows_with_the_records(h200_mini):
    """Once the guard is lifted, the predictor is (1-w)*pretrained + w*tuned with w = n/(n+mix_records),
    set again at every retrain; the tuned copy scores its correction at the pretrained scale, and the
    running fine-tune, which can no longer be chosen, is no longer trained."""
    from pruner_offline.adapt.methods import mixed

    module, d = h200_mini
    stream = programs_of_store(d, tuning_order(d))
    cfg = AdaptConfig(retrain_every=2, epochs=2, evidence=0.0, mix_records=100)
    g = make_method("guarded", module, cfg)
    online, moves = OnlineRecords(), []  # records measured whenever the mix was set
    for r, start in enumerate(range(0, len(stream), cfg.round_size), 1):
        for p in stream[start:start + cfg.round_size]:
            online.add(p)
        moved, before = g.moved, copy.deepcopy(g.finetuned.state_dict())
        g.after_round(online, r)
        if g.moved and (not moved or r % cfg.retrain_every == 0):
            moves.append(len(online))
        if moved:
            assert all(torch.equal(a, b) for a, b in zip(before.values(), g.finetuned.state_dict().values()))
        if len(moves) >= 3:
            break
    assert len(moves) == 3, "with no margin asked for, some candidate should lead the pretrained model"
    w = moves[-1] / (moves[-1] + 100)
    assert not g.uninformed and g.weight == pytest.approx(w) and g.chosen == f"mix {w:.3f}"
    assert float(g.tuned.correction_scale) == float(module.correction_scale)
    for a, b in zip(g.predictor.state_dict().values(), mixed(module, g.tuned, w).state_dict().values()):
        torch.testing.assert_close(a, b)


def test_guard_is_dropped_at_the_first_retrain_only_for_a_pretrained_model_no_better_than_a_coin(h200_store):
    """Real H200 programs as the new device's first records. A model of the bundled CPU model's shape
    with untrained weights ranks their good pairs no better than a coin: guarded is a running
    fine-tune from the first retrain on, for good (at scale 1, the same weights as `finetune`; no
    tuned copy trained after that). The bundled H200 model ranks them far better than a coin: guarded
    keeps it, although the fine-tune on the same records is the same network the CPU run moved to."""
    def cpu_model():
        # the bundled CPU model's shape with untrained weights and no draft prior: a pretrained
        # model that ranks another device's programs no better than a coin (the bundled one,
        # trained on 812 CPU tasks, ranks these H200 records better than a coin)
        module, _ = load_model(REPO / "checkpoints" / "pacm.pt")
        torch.manual_seed(0)
        for layer in module.modules():
            if hasattr(layer, "reset_parameters") and layer is not module:
                layer.reset_parameters()
        with torch.no_grad():
            module.net.prior.weight.zero_()
        module.correction_scale.fill_(1.0)
        return module

    from pruner_offline.adapt.methods import better_than_chance, good_pair_scores

    d = FeatureStore(h200_store).load()
    stream = programs_of_store(d, tuning_order(d)[:40])
    cfg = AdaptConfig(retrain_every=2, epochs=2)
    first = OnlineRecords(stream[:20]).data()
    rows = np.arange(20)
    chosen, methods = {}, {}
    for name in ("pacm.pt", "pacm_h200.pt"):
        module = cpu_model() if name == "pacm.pt" else load_model(REPO / "checkpoints" / name)[0]
        pred = module.predict_rows(lambda r: gather_batch(first, r), rows)
        ranks = better_than_chance(pred, first.records["label"], first.records["task_id"], cfg.evidence,
                                   cfg.round_size)
        methods[name] = make_method("guarded", module, cfg)
        chosen[name] = (ranks, _replay(methods[name], stream, cfg))
    assert chosen["pacm.pt"] == (False, ["pretrained"] + ["finetune"] * 3)
    assert chosen["pacm_h200.pt"] == (True, ["pretrained"] * 4)
    cpu = methods["pacm.pt"]
    assert cpu.uninformed and cpu.gains.shape[1] == 0  # nothing judged once there is nothing to guard
    finetune, online = make_method("finetune", cpu_model(), cfg), OnlineRecords()
    for r, start in enumerate(range(0, len(stream), cfg.round_size), 1):
        for p in stream[start:start + cfg.round_size]:
            online.add(p)
        finetune.after_round(online, r)
    for a, b in zip(cpu.predictor.state_dict().values(), finetune.predictor.state_dict().values()):
        torch.testing.assert_close(a, b)
    # a ranking exactly wrong loses its guard, unless too few records are judged to tell
    y, task = first.records["label"], first.records["task_id"]
    judged = good_pair_scores([y], y, task, np.ones(len(y), dtype=bool)).shape[1]
    assert better_than_chance(y, y, task, 2.0, judged)
    assert not better_than_chance(-y, y, task, 2.0, judged) and better_than_chance(-y, y, task, 2.0, judged + 1)


def test_a_model_of_another_target_kind_is_not_guarded(h200_store, capsys):
    """The bundled CPU model at its shipped scale ranks the first 20 H200 records better than a coin,
    so at the first retrain the coin test keeps its guard; its file says it never saw a cuda program,
    and with that fact (``cross_target``, which `adapt` reads from the file) guarded is the running
    fine-tune from the first retrain on, trained as by hand, with no tuned copy."""
    from pruner_offline.adapt.methods import train_online

    d = FeatureStore(h200_store).load()
    stream = programs_of_store(d, tuning_order(d)[:40])
    cfg = AdaptConfig(retrain_every=2, epochs=2)
    module, meta = load_model(REPO / "checkpoints" / "pacm.pt")
    assert trained_on_other_kinds(meta, ["cuda"]) == ["llvm"] and float(module.correction_scale) < 1
    assert _replay(make_method("guarded", module, cfg), stream, cfg)[:2] == ["pretrained"] * 2
    cross = make_method("guarded", module, dataclasses.replace(cfg, cross_target=True))
    assert _replay(cross, stream, cfg) == ["pretrained"] + ["finetune"] * 3
    assert cross.tuned is None and cross.gains.shape[1] == 0 and cross.retrains == 2
    by_hand, online = copy.deepcopy(module), OnlineRecords(stream[:20])
    train_online(by_hand, online, cfg, cfg.seed, keep_scale=True)
    train_online(by_hand, OnlineRecords(stream), cfg, cfg.seed + 1, keep_scale=True)
    for a, b in zip(cross.predictor.state_dict().values(), by_hand.state_dict().values()):
        torch.testing.assert_close(a, b)
    # the command reads it from the file, and says so
    assert main(["adapt", "--checkpoint", str(REPO / "checkpoints" / "pacm.pt"), "--target", "cuda",
                 "--records", str(h200_store), "--method", "guarded", "--epochs", "1", "--json", "--quiet",
                 "--eval-fraction", "0.25", "--out", str(Path(h200_store).parent / "cross")]) == 0
    said = capsys.readouterr()
    assert "cross-target: guarded fine-tunes it from the first retrain" in said.err
    path = json.loads(said.out.strip().splitlines()[-1])["models"]["guarded"]
    assert load_model(path)[1]["predicting"] == "finetune"


def test_guarded_running_finetune_trains_as_finetune_but_keeps_the_scale(setup):
    """Guarded's running fine-tune sees the records and seeds `finetune` sees, but scores its
    correction at the pretrained scale throughout (¼ here), as its tuned copy does; at the first
    retrain the tuned copy is that fine-tune. `finetune` resets the scale to 1 after each retrain."""
    from pruner_offline.adapt.methods import train_online

    store, model_file = setup
    module, _ = load_model(model_file)
    module.correction_scale.fill_(0.25)  # the shipped recipe's (this fixture's recipe has none)
    d = FeatureStore(store).load()
    cfg = AdaptConfig(round_size=10, retrain_every=2, epochs=2)
    g, ft = make_method("guarded", module, cfg), make_method("finetune", module, cfg)
    by_hand = copy.deepcopy(module)
    online = OnlineRecords()
    for r, p in enumerate(programs_of_store(d, tuning_order(d)[:60])):
        online.add(p)
        if (r + 1) % 10 == 0:
            g.after_round(online, (r + 1) // 10)
            ft.after_round(online, (r + 1) // 10)
            if (r + 1) % 20 == 0:
                train_online(by_hand, online, cfg, cfg.seed + (r + 1) // 20 - 1, keep_scale=True)
            if g.retrains == 1:
                for a, b in zip(g.tuned.state_dict().values(), g.finetuned.state_dict().values()):
                    torch.testing.assert_close(a, b)
    assert g.retrains == ft.retrains == 3 and not g.moved, (g.moved, g.uninformed)
    assert float(g.finetuned.correction_scale) == 0.25 and float(ft.predictor.correction_scale) == 1.0
    for a, b in zip(g.finetuned.state_dict().values(), by_hand.state_dict().values()):
        torch.testing.assert_close(a, b)
    if g.uninformed:  # then the running fine-tune predicts
        for a, b in zip(g.predictor.state_dict().values(), by_hand.state_dict().values()):
            torch.testing.assert_close(a, b)


def test_simulation_curves(setup):
    store, model_file = setup
    module, _ = load_model(model_file)
    d = FeatureStore(store).load()
    order = tuning_order(d)
    stream = programs_of_store(d, order[:120])
    held = OnlineRecords(programs_of_store(d, order[240:])).data()
    curves = simulate(module, ["moa", "frozen", "scratch", "finetune"], stream, held,
                      AdaptConfig(epochs=3), eval_every=50).curves
    assert [p["online_records"] for p in curves["moa"]] == [0, 50, 100, 120]
    frozen = {p["peak@1"] for p in curves["frozen"]}
    assert len(frozen) == 1
    assert curves["moa"][0] == curves["frozen"][0]  # both start from the pretrained model
    assert curves["moa"][-1]["retrains"] == 3  # 12 rounds, every 4th


def test_cli_adapt_json_and_target_check(setup, tmp_path, capsys):
    store, model_file = setup
    assert main(["adapt", "--checkpoint", str(model_file), "--target", "llvm", "--records", str(store),
                 "--eval-fraction", "0.25", "--method", "all", "--epochs", "2", "--json", "--quiet",
                 "--out", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    curves = out["curves"]
    assert set(curves) == {"guarded", "moa", "finetune", "scratch", "frozen"}
    assert curves["moa"][0]["online_records"] == 0 and curves["moa"][-1]["online_records"] == 240
    assert all(set(p) == {"online_records", "peak@1", "peak@5"} for p in curves["moa"])
    assert (tmp_path / "adapt_curves.png").stat().st_size > 1000
    # what adapting is for: each method's adapted model, a model file like any other (frozen's is
    # the pretrained one, not copied); it scores the held-out records as the curve's last point says
    assert out["models"] == {m: str(tmp_path / f"adapted_{m}.pt") for m in ("guarded", "moa", "finetune", "scratch")}
    pretrained, _ = load_model(model_file)
    for m, path in out["models"].items():
        adapted, meta = load_model(path)
        assert meta["method"] == m and meta["online_records"] == 240 and meta["retrains"] == 6
        assert m != "guarded" or meta["predicting"] in ("pretrained", "finetune") \
            or meta["predicting"].startswith("mix ")
        changed = any(not torch.equal(a, b) for a, b in zip(adapted.state_dict().values(),
                                                            pretrained.state_dict().values()))
        assert changed or (m == "guarded" and meta["predicting"] == "pretrained")
    d = FeatureStore(store).load()
    held = OnlineRecords(programs_of_store(d, np.flatnonzero(held_out_rows(d, 0.25)))).data()
    for m in ("moa", "finetune"):
        assert heldout_scores(load_model(out["models"][m])[0], held)["peak@1"] == pytest.approx(
            curves[m][-1]["peak@1"], abs=1e-5)
    assert main(["adapt", "--checkpoint", str(model_file), "--target", "llvm", "--records", str(store),
                 "--method", "all", "--save", str(tmp_path / "one.pt"), "--quiet"]) == 2
    assert "--save names one model file, and --method all adapts 5" in capsys.readouterr().err
    assert main(["adapt", "--checkpoint", str(model_file), "--target", "llvm", "--records", str(store),
                 "--method", "frozen", "--save", str(tmp_path / "one.pt"), "--quiet"]) == 2
    assert "--method frozen adapts nothing" in capsys.readouterr().err
    assert main(["adapt", "--checkpoint", str(model_file), "--target", "llvm", "--records", str(store),
                 "--method", "finetune", "--epochs", "1", "--save", str(tmp_path / "one.pt"), "--quiet"]) == 0
    said = capsys.readouterr()
    assert f"finetune: adapted on 320 records, 8 retrains -> {tmp_path / 'one.pt'}" in said.out
    assert "nothing held out, so no scores" in said.err and load_model(tmp_path / "one.pt")[1]["method"] == "finetune"
    assert main(["adapt", "--checkpoint", str(model_file), "--target", "cuda", "--records", str(store), "--quiet"]) == 2
    assert "holds llvm records, but --target is cuda" in capsys.readouterr().err


WRITER = r"""
import sys, time
src, dst, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
lines = open(src, "rb").read().splitlines(keepends=True)
with open(dst, "ab", buffering=0) as f:
    for i, line in enumerate(lines):
        half = len(line) // 2
        f.write(line[:half])      # a tuning run caught in the middle of a line
        time.sleep(pause)
        f.write(line[half:])
"""


def test_follow_a_growing_record_file_with_a_kill_and_restart(tenset_mini, tmp_path):
    model_file = REPO / "checkpoints" / "pacm.pt"  # live records are featurized: a real-schema model
    src = next(f for f in (tenset_mini / "measure_records" / "epyc-zen3").glob("*.json")
               if "7d79c516e212fe1d73f5dbb90eaca2cf,[32,10]" in f.name)
    total = sum(1 for _ in open(src))
    log = tmp_path / "tuning.json"
    save = tmp_path / "adapted.pt"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(src), str(log), "0.03"])
    cmd = [sys.executable, "-m", "pruner_offline.cli", "adapt", "--checkpoint", str(model_file), "--target",
           "llvm", "--records", str(log), "--follow", "--tasks", str(tenset_mini), "--save", str(save),
           "--method", "moa", "--epochs", "2", "--idle-timeout", "4"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    state = save.with_name(save.name + ".state")
    deadline = time.time() + 120
    while time.time() < deadline:
        if state.exists() and torch.load(state, weights_only=True)["rounds"] >= 2:
            break
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed_at = torch.load(state, weights_only=True)
    assert 2 <= killed_at["rounds"] < total // 10, "adapt was not cut part way"
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    writer.wait(timeout=120)
    assert second.returncode == 0, second.stderr
    assert f"resuming after line {killed_at['lines']}" in second.stderr
    result = json.loads(second.stdout.strip().splitlines()[-1])
    assert result["online_records"] == total
    assert result["rounds"] == total // 10 and result["skipped"] == 0
    final = torch.load(state, weights_only=True)
    assert final["rounds"] == total // 10 and final["lines"] == (total // 10) * 10
    module, meta = load_model(save)
    assert meta["rounds"] == total // 10 and meta["method"] == "moa"
    assert not os.path.exists(str(save) + ".tmp")
