"""Our cost model inside MetaSchedule: draft-then-verify scores on a real schedule space, and a tiny
real tuning run through the CLI (llvm, 16 trials)."""

import argparse
import io
import json
import logging
import math
import re
import shutil
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm.s_tir import meta_schedule as ms

from pruner_offline.cli import main
from pruner_offline.features import EXTRACTABLE_SCHEMAS, FEATURE_SCHEMA_VERSION
from pruner_offline.measure.settings import MeasureSettings, RPCSettings
from pruner_offline.training.export import ModelFileError, export_model
from pruner_offline.training.module import CostModelModule
from pruner_offline.training.normalize import fit_scales
from pruner_offline.tuning.cost_model.candidates import CandidateFeatures
from pruner_offline.tuning.cost_model.pruner import PrunerCostModel, load_checkpoint
from pruner_offline.tuning.cost_model.online import AdaptUpdate
from pruner_offline.tuning.cost_model.ranking import draft_then_verify, verify_count
from pruner_offline.tuning.run.tasks import make_cost_model
from pruner_offline.tuning.search.sampling import sample_candidates
from pruner_offline.tuning.settings import PrunerSettings, TuneSettings
from pruner_offline.tuning.frontends.workloads import load_module, named_workload

REPO = Path(__file__).resolve().parents[1]


def _sample_space() -> tuple[ms.TuneContext, list[ms.MeasureCandidate]]:
    """A small matmul's TuneContext and 40 postprocessed candidates sampled from its design space."""
    return sample_candidates(named_workload("matmul-small"), 40)


@pytest.fixture(scope="module")
def space() -> tuple[ms.TuneContext, list[ms.MeasureCandidate]]:
    return _sample_space()


@pytest.fixture(scope="module")
def candidates(space) -> list[ms.MeasureCandidate]:
    return space[1]


def _trained(model: str, candidates, tmp: Path) -> Path:
    # A stand-in for the bundled checkpoint: fit on the candidates with the analytic score as label.
    feats = CandidateFeatures("llvm", "epyc-7452").full([c.sch for c in candidates])
    module = CostModelModule(model=model, feature_schema=str(FEATURE_SCHEMA_VERSION))
    module.set_scales(fit_scales(np.concatenate([f.statements for f in feats]),
                                 np.concatenate([f.symbols for f in feats]), np.stack([f.dataflow for f in feats]),
                                 np.ones((1, 1, 37), np.float32), np.array([f.draft_score for f in feats])))
    module = AdaptUpdate(epochs=3)(module, feats, np.array([1 / f.draft_score for f in feats]))
    return export_model(module, tmp / f"{model}.pt")


@pytest.fixture(scope="module")
def checkpoints(candidates, tmp_path_factory) -> tuple[Path, Path]:
    """(PaCM, draft): the bundled model files when present, else models trained here."""
    bundled = REPO / "checkpoints" / "pacm.pt", REPO / "checkpoints" / "draft.pt"
    if all(p.is_file() for p in bundled):
        return bundled
    tmp = tmp_path_factory.mktemp("models")
    return _trained("pacm", candidates, tmp), _trained("draft", candidates, tmp)


def test_ranking_puts_verified_above_draft_order():
    draft = np.array([0.1, 0.9, np.nan, 0.5, 0.7, 0.3])
    calls = []

    def verify(idx):
        calls.append(list(idx))
        return -draft[idx]  # the verifier reverses the draft's opinion

    s = draft_then_verify(draft, 0.4, verify)
    assert calls == [[1, 4]]  # ceil(0.4 * 5 valid): the draft's two best
    assert s[2] == 0 and s[4] > s[1] > 0.5  # the verifier's order on top
    assert 0.5 >= s[3] > s[5] > s[0] > 0  # the rest in draft order
    assert verify_count(0, 0.2) == 0 and verify_count(3, 0.01) == 1


def test_predict_is_draft_then_verify(space, checkpoints):
    context, candidates = space
    model = PrunerCostModel(target_kind="llvm", verifier=load_checkpoint(checkpoints[0]),
                            draft=load_checkpoint(checkpoints[1]), device="epyc-7452", verify_fraction=0.25)
    scores = model.predict(context, candidates)
    assert scores.shape == (len(candidates),) and np.isfinite(scores).all() and (scores > 0).all()
    draft = model._draft_scores(candidates)
    k = verify_count(len(candidates), 0.25)
    by_draft = np.argsort(-draft, kind="stable")
    assert (scores[by_draft[:k]] > 0.5).all() and (scores[by_draft[k:]] <= 0.5).all()
    assert (np.diff(scores[by_draft[k:]]) < 0).all()  # unverified keep the draft order
    assert model.features.times.full_programs == k  # only the verified were fully featurized
    # A second look at the same population costs hash lookups, not featurization.
    np.testing.assert_array_equal(model.predict(context, candidates), scores)
    assert model.features.times.draft_programs == len(candidates)


def test_the_search_can_rank_with_the_tuning_machines_constants(space, checkpoints):
    """--search-device: the draft stage scores with the machine's constants, the verifier still
    reads the score made with the constants its model was trained with."""
    context, candidates = space
    own = PrunerCostModel(target_kind="llvm", verifier=load_checkpoint(checkpoints[0]), device="epyc-7452")
    here = PrunerCostModel(target_kind="llvm", verifier=load_checkpoint(checkpoints[0]), device="epyc-7452",
                           search_device="epyc-2vcpu")
    alone = PrunerCostModel(target_kind="llvm", device="epyc-2vcpu")
    np.testing.assert_array_equal(here._draft_scores(candidates), alone._draft_scores(candidates))
    assert not np.array_equal(here._draft_scores(candidates), own._draft_scores(candidates))
    schs = [c.sch for c in candidates[:4]]
    assert [f.draft_score for f in here.features.full(schs)] == [f.draft_score for f in own.features.full(schs)]
    with pytest.raises(ValueError, match="learned draft model"):
        PrunerCostModel(target_kind="llvm", draft=load_checkpoint(checkpoints[1]), device="epyc-7452",
                        search_device="epyc-2vcpu")
    # measured elsewhere, a checkpoint whose constants count other cores than the run's says so,
    # and what to do
    remote = MeasureSettings(rpc=RPCSettings.parse("127.0.0.1:9190", "board"))
    with pytest.warns(UserWarning, match=r"epyc-2vcpu \(2 cores\) for a run on 8: give --search-device"):
        make_cost_model(TuneSettings(checkpoint=str(checkpoints[0]), num_cores=8, measure=remote,
                                     pruner=PrunerSettings(online_epochs=0)))
    with pytest.raises(ValueError, match="--search-device host reads this machine, but the programs are measured "
                                         "through --rpc-tracker"):
        make_cost_model(TuneSettings(checkpoint=str(checkpoints[0]), num_cores=2, measure=remote,
                                     pruner=PrunerSettings(online_epochs=0, search_device="host")))
    # measured here, the search ranks with this machine's own constants, read from the OS
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = make_cost_model(TuneSettings(checkpoint=str(checkpoints[0]), num_cores=2,
                                             pruner=PrunerSettings(online_epochs=0)))
    assert model.search_device.name == "host" and model.search_device.num_units == 2
    assert model.device.name == "epyc-2vcpu"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = make_cost_model(TuneSettings(checkpoint=str(checkpoints[0]), num_cores=2,
                                             pruner=PrunerSettings(online_epochs=0, search_device="epyc-2vcpu")))
    assert model.search_device.name == "epyc-2vcpu" and model.device.name == "epyc-2vcpu"


def test_save_load_round_trip(space, checkpoints, tmp_path):
    context, candidates = space
    model = PrunerCostModel(target_kind="llvm", verifier=load_checkpoint(checkpoints[0]), device="epyc-7452")
    model.save(str(tmp_path / "v.pt"))
    other = PrunerCostModel(target_kind="llvm", device="epyc-7452")
    other.load(str(tmp_path / "v.pt"))
    np.testing.assert_array_equal(model.predict(context, candidates), other.predict(context, candidates))


def test_tiny_tuning_run(checkpoints, tmp_path):
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["tune", "--workload", "matmul-small", "--trials", "32", "--population", "64",
                   "--checkpoint", str(checkpoints[0]), "--draft", str(checkpoints[1]), "--online-epochs", "2",
                   "--work-dir", str(tmp_path), "--seed", "0", "--quiet"])
    assert rc == 0
    # --quiet: the report line alone; MetaSchedule's per-batch tables went to the run's logs
    (line,) = out.getvalue().strip().splitlines()
    report = json.loads(line)
    assert "Total trials: 32" in (tmp_path / "logs" / "tvm.s_tir.meta_schedule.logging.task_scheduler.log").read_text()
    for key in ("best_latency_per_batch", "search_seconds", "cost_model_seconds", "trials", "cost_model"):
        assert key in report
    assert report["cost_model"] == "pruner" and report["trials"] == 32
    assert report["best_latency_per_batch"] and all(math.isfinite(x) and x > 0 for x in report["best_latency_per_batch"])
    assert 0 < report["cost_model_seconds"] < report["search_seconds"] and report["cost_model_cpu_seconds"] > 0
    # the cost so far after each batch: one per batch, growing, the last at most the run's (the
    # update of the last batch comes before it; a save after the run may add to the total)
    per_batch = report["cost_model_seconds_per_batch"]
    assert len(per_batch) == len(report["best_latency_per_batch"]) and per_batch == sorted(per_batch)
    assert 0 < per_batch[0] < per_batch[-1] <= report["cost_model_seconds"]
    # the first batch retrained PaCM before the second was verified; the last, with nothing left to
    # verify, did not
    assert report["cost_model_breakdown"]["model_online_s"] > 0
    records = (tmp_path / "database_tuning_record.json").read_text().splitlines()
    assert len(records) == 32 and (tmp_path / "database_workload.json").stat().st_size > 0


def test_tune_refuses_cuda_without_gpu(tmp_path, capsys):
    if tvm.cuda(0).exist:
        pytest.skip("a GPU is visible")
    assert main(["tune", "--workload", "matmul-small", "--target", "cuda", "--trials", "1",
                 "--work-dir", str(tmp_path)]) == 2
    assert "GPU" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed here: CUDA programs cannot be built")
def test_a_cuda_tuning_searchs_candidates_build_with_nvcc_for_the_named_gpu_without_one():
    """tune --target cuda --device h200 searches here (draft-then-verify, the bundled H200
    checkpoint) and builds here for sm_90: no GPU is needed until a program is timed."""
    from pruner_offline.measure.builder import PooledBuilder
    from pruner_offline.tuning.context import make_context
    from pruner_offline.tuning.run.tasks import make_strategy, run_target
    from tvm.s_tir.meta_schedule.builder import BuilderInput

    s = TuneSettings(target_kind="cuda", device="h200", checkpoint=str(REPO / "checkpoints" / "pacm_h200.pt"),
                     num_cores=2, population_size=64, seed=0, trials=8, trials_per_batch=8,
                     pruner=PrunerSettings(online_epochs=0))
    target = run_target(s)
    assert target.arch == "sm_90"
    model = make_cost_model(s)
    strategy = make_strategy(s, model)
    assert strategy is not None  # the search tune runs for a checkpoint, not MetaSchedule's evolutionary one
    context = make_context(named_workload("matmul-small"), target, num_threads=1, seed=0,
                           logger=logging.getLogger("test"), population_size=64, strategy=strategy)
    context.pre_tuning(max_trials=8, num_trials_per_iter=8, design_spaces=context.generate_design_space(),
                       database=ms.database.MemoryDatabase(), cost_model=model)
    candidates = context.generate_measure_candidates()
    assert len(candidates) == 8 and model.features.times.draft_programs >= 64
    builder = PooledBuilder(max_workers=2, timeout_sec=120)
    try:
        built = builder.build([BuilderInput(c.sch.mod, target) for c in candidates])
    finally:
        builder.close()
    assert all(b.error_msg is None for b in built), [b.error_msg for b in built]
    assert all(Path(b.artifact_path).stat().st_size > 0 for b in built)


def test_module_files_load_as_the_workload(tmp_path):
    mod = named_workload("matmul-small")
    (tmp_path / "m.py").write_text(mod.script())
    (tmp_path / "m.json").write_text(tvm.ir.save_json(mod))
    # a file written by hand begins with the imports `.script()` leaves commented out, which the
    # TVMScript parser refuses ("Visitor of AST node is not implemented: Import")
    imports = "import tvm\nfrom tvm.script import ir as I\nfrom tvm.script import tirx as T\n"
    (tmp_path / "with_imports.py").write_text(imports + mod.script())
    for name in ("m.py", "m.json", "with_imports.py"):
        tvm.ir.assert_structural_equal(load_module(tmp_path / name), mod)
    # each used to reach the user as a bare parser message or, for TVMScript, an "internal error"
    for name, text, why in (("bad.json", "[1, 2", "not TVM's JSON"), ("obj.json", '{"a": 1}', "not TVM's JSON"),
                            ("bad.py", "def f(:\n", "not TVMScript")):
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=f"{name}: {why}"):
            load_module(tmp_path / name)
    (tmp_path / "bin.py").write_bytes(b"\x8f\x00\xff")
    with pytest.raises(ValueError, match="bin.py: not a text file"):
        load_module(tmp_path / "bin.py")
    # tune tunes main alone: a second function was dropped without a word, a module without main
    # failed inside MetaSchedule
    two = tvm.IRModule({"main": mod["main"], "other": mod["main"].with_attr("global_symbol", "other")})
    (tmp_path / "two.json").write_text(tvm.ir.save_json(two))
    with pytest.raises(ValueError, match="two.json: tune takes one PrimFunc named main; this module holds main, other"):
        load_module(tmp_path / "two.json")
    (tmp_path / "nomain.json").write_text(tvm.ir.save_json(tvm.IRModule({"mm": mod["main"]})))
    with pytest.raises(ValueError, match="this module holds mm"):
        load_module(tmp_path / "nomain.json")


def test_tune_reports_an_unreadable_module_file(tmp_path, capsys):
    (tmp_path / "bad.py").write_text("def f(:\n")
    assert main(["tune", "--module", str(tmp_path / "bad.py"), "--trials", "1", "--work-dir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "bad.py: not TVMScript" in err and "internal error" not in err
    assert main(["tune", "--workload", "nope", "--trials", "1", "--work-dir", str(tmp_path / "w")]) == 2
    # a KeyError's str() would quote the whole message
    assert capsys.readouterr().err.startswith("pruner-train tune: unknown workload 'nope'; built in: matmul,")


def test_moa_update_adapts_the_verifier_inside_tuning(candidates, checkpoints):
    feats = CandidateFeatures("llvm", "epyc-7452").full([c.sch for c in candidates[:16]])
    costs = np.array([1.0 / f.draft_score for f in feats])
    costs[3] = np.inf  # a failed run
    verifier = load_checkpoint(str(checkpoints[0]))
    update = AdaptUpdate("moa", epochs=2)
    assert update(verifier, feats[:4], costs[:4]) is None  # too few programs to rank
    adapted = update(verifier, feats, costs)
    assert adapted is not None and adapted is not verifier
    moved = [not np.allclose(a.detach(), b.detach()) for a, b in zip(adapted.parameters(), verifier.parameters())]
    assert any(moved)
    # the momentum copy moved by (1 - m) of the way only
    slow = list(update._adapter.momentum.parameters())
    for s, v, a in zip(slow, verifier.parameters(), adapted.parameters()):
        np.testing.assert_allclose(s.detach(), 0.99 * v.detach() + 0.01 * a.detach(), rtol=1e-5, atol=1e-6)


def test_in_task_trees_learn_the_runs_own_order_and_join_the_verifier(space, checkpoints):
    """Trees fitted on measured programs rank programs they never saw by what the measurements
    followed (here seconds = 1 / the analytic score, a function of the loops that PaCM's own
    statement features carry), and once fitted, the verifier's order is the sum of both ranks."""
    from scipy.stats import kendalltau, rankdata
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    from pruner_offline.tuning.cost_model.in_task import InTaskTrees, _fit

    def pooled(fs):  # sum, mean and max of each program's statement rows, as the trees see them
        return np.stack([np.concatenate([f.statements.sum(0), f.statements.mean(0), f.statements.max(0)]) for f in fs])

    context, candidates = space
    feats = CandidateFeatures("llvm", "epyc-7452").full([c.sch for c in candidates])
    seconds = np.array([1.0 / f.draft_score for f in feats])
    trees, scores = InTaskTrees(min_programs=30), np.arange(10.0)
    trees.measured(feats[:29], seconds[:29])
    assert trees.combined(feats[30:], scores) is scores  # fewer than min_programs: the verifier alone
    trees.measured(feats[:30], seconds[:30])
    assert trees.model is None  # fitted when next asked to score, not after a run's last batch
    trees.combined(feats[30:], scores)
    predicted = trees.model.predict(pooled(feats[30:])[:, trees.columns])
    assert kendalltau(predicted, -seconds[30:]).statistic > 0.5
    # fitted on the columns that vary, the first of identical ones: the trees of all columns, cheaper
    x = pooled(feats[:30])
    assert 0 < len(trees.columns) < x.shape[1] and np.unique(x[:, trees.columns], axis=1).shape[1] == len(trees.columns)
    whole = _fit(x, seconds[:30].min() / seconds[:30], 0)
    np.testing.assert_allclose(whole.predict(pooled(feats[30:])), predicted)

    model = PrunerCostModel.from_checkpoint(checkpoints[0], target_kind="llvm", in_task=InTaskTrees(min_programs=16))
    model.update(context, candidates[:8], [RunnerResult([s], None) for s in seconds[:8]])
    alone = model._verify(candidates[20:], np.arange(20))
    model.update(context, candidates[8:16], [RunnerResult([s], None) for s in seconds[8:16]])
    assert len(model.measured.features) == 8  # a measured batch is learned when the verifier next scores
    joined = model._verify(candidates[20:], np.arange(20))
    assert len(model.measured.features) == 16
    trees_of_rest = model.in_task.model.predict(pooled(feats[20:])[:, model.in_task.columns])
    np.testing.assert_allclose(joined, rankdata(alone) + rankdata(trees_of_rest))


def test_a_network_runs_programs_are_labelled_within_their_own_task(space, checkpoints):
    """One cost model serves every task of a network's tuning run: each measured program keeps its
    task, and the in-task trees and online training label it against the best of that task only
    (against one best over all tasks, every program of a slow kernel would look alike)."""
    from tvm.s_tir.meta_schedule import _ffi_api
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    from pruner_offline.tuning.cost_model.pruner import task_key
    from pruner_offline.tuning.cost_model.in_task import InTaskTrees, task_throughput

    context, candidates = space
    # a second kernel of the network (the raw constructor: the Python one imports tensor intrinsics, ~20 s)
    other = _ffi_api.TuneContext(named_workload("dense"), tvm.target.Target("llvm"), None, None, "dense", 1, -1, None)
    assert task_key(context) != task_key(other) and task_key(context) == task_key(context)
    calls = []
    model = PrunerCostModel.from_checkpoint(checkpoints[0], target_kind="llvm", in_task=InTaskTrees(min_programs=8),
                                            on_update=lambda v, f, c, t: calls.append((list(t), c.copy())))
    fast, slow = [RunnerResult([1e-4 * (1 + i)], None) for i in range(4)], [RunnerResult([1.0 + i], None) for i in range(4)]
    model.update(context, candidates[:4], fast)
    model.update(other, candidates[4:8], slow)
    model._verify(candidates[8:12], np.arange(4))
    tasks, costs = calls[-1]
    assert tasks == [task_key(context)] * 4 + [task_key(other)] * 4
    y = task_throughput(costs, tasks)
    np.testing.assert_allclose(y, [1, 1 / 2, 1 / 3, 1 / 4] * 2)
    assert model.in_task.model is not None

    # online training groups the records by the same tasks
    feats = CandidateFeatures("llvm", "epyc-7452").full([c.sch for c in candidates[:16]])
    update, seen = AdaptUpdate("finetune", epochs=1), []
    update(load_checkpoint(str(checkpoints[0])), feats[:2], np.ones(2), ["a", "b"])  # too few to train
    after_round = update._adapter.after_round
    update._adapter.after_round = lambda online, r: seen.append(online.data()) or after_round(online, r)
    update(load_checkpoint(str(checkpoints[0])), feats, np.r_[np.linspace(1e-4, 1e-3, 8), np.linspace(1, 10, 8)],
           ["a"] * 8 + ["b"] * 8)
    data = seen[0].records
    assert len(set(data["task_id"])) == 2
    for t in set(data["task_id"]):
        assert data["label"][data["task_id"] == t].max() == 1.0  # each task's best is labelled 1


def test_a_run_defaults_to_the_cores_this_process_may_use(monkeypatch):
    """A tuning run compiles for --cores threads; a fixed default of 2 left most of a bigger machine idle."""
    import os

    from pruner_offline.tuning.settings import TuneSettings

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(12)), raising=False)
    assert TuneSettings().num_cores == 12
    assert TuneSettings(num_cores=3).num_cores == 3


@pytest.mark.parametrize("schema", EXTRACTABLE_SCHEMAS)
def test_full_features_are_made_in_the_verifiers_schema(space, schema):
    """A checkpoint trained on features of schema 2 (per-store columns by MetaSchedule's extractor)
    keeps tuning after schema 3: the candidates it verifies are featurized the way it was trained.
    A schema this version cannot extract is refused."""
    context, candidates = space
    module = CostModelModule(model="pacm", feature_schema=str(schema))
    model = PrunerCostModel(target_kind="llvm", verifier=module, device="epyc-7452", verify_fraction=0.25)
    assert model.features.schema == schema
    model.predict(context, candidates)
    full = [f for f in model.features._full.items.values() if f is not None]
    assert full and {f.schema_version for f in full} == {schema}
    with pytest.raises(ModelFileError, match="schema '1'"):
        PrunerCostModel(target_kind="llvm", verifier=CostModelModule(model="pacm", feature_schema="1"))


def _reference(name: str, args: list[np.ndarray]) -> np.ndarray:
    """What the named kernel computes, in numpy."""
    if name == "grouped-conv2d":  # NCHW, 3x3, pad 1, 8 groups of 16 channels
        x, w = args
        p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 128, 28, 28), np.float32)
        for o in range(128):
            g = o // 16
            for ry in range(3):
                for rx in range(3):
                    out[0, o] += np.tensordot(w[o, :, ry, rx], p[0, g * 16:(g + 1) * 16, ry:ry + 28, rx:rx + 28], 1)
        return out
    if name == "dense-gelu":
        from math import erf
        y = args[0] @ args[1].T
        return 0.5 * y * (1 + np.vectorize(erf)(y / np.sqrt(2)))
    if name == "gemv":
        return args[0] @ args[1].T
    if name == "softmax":
        e = np.exp(args[0] - args[0].max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    x, gamma, beta = args  # layer-norm
    return (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * gamma + beta


@pytest.mark.parametrize("name", ["grouped-conv2d", "dense-gelu", "gemv", "softmax", "layer-norm"])
def test_kernels_of_other_kinds_compute_what_they_are_named_for_and_the_search_scores_them(name):
    mod = named_workload(name)
    rng = np.random.default_rng(0)
    shapes = [[int(d) for d in a.shape] for a in ms.arg_info.ArgInfo.from_prim_func(mod["main"])]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes[:-1]]
    out = tvm.runtime.tensor(np.zeros(shapes[-1], np.float32))
    tvm.compile(mod, target="llvm")(*[tvm.runtime.tensor(a) for a in args], out)
    np.testing.assert_allclose(out.numpy(), _reference(name, args), rtol=1e-3, atol=1e-3)
    context, candidates = sample_candidates(mod, 8)
    scores = PrunerCostModel(target_kind="llvm", device="epyc-2vcpu").predict(context, candidates)
    assert len(candidates) >= 1 and len(scores) == len(candidates) and np.all(np.isfinite(scores))


def test_tunes_help_names_every_built_in_workload():
    from pruner_offline.cli import build_parser
    from pruner_offline.tuning.frontends.workloads import WORKLOADS

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    workload = next(a for a in sub.choices["tune"]._actions if a.dest == "workload")
    named = set(re.findall(r"[\w-]+", workload.help.split("(")[0].split(":", 1)[1]))
    assert named == set(WORKLOADS)
