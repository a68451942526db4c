"""Whole networks: the built-in MLP tuned end to end (every kernel, one shared cost model, compiled
with the tuned database) and checked against torch; and the inputs `tune --network` /
`--exported-program` must refuse."""

import json
import pickle
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from pruner_offline.cli import main
from pruner_offline.tuning.run.network import tune_network
from pruner_offline.tuning.frontends.torch_export import MLP, NETWORKS, load_exported_program, named_network, torch_network
from pruner_offline.measure.settings import MeasureSettings
from pruner_offline.tuning.settings import PrunerSettings, TuneSettings

from conftest import REPO


def test_the_mlp_tunes_end_to_end_and_computes_what_torch_computes(tmp_path):
    torch.set_num_threads(1)
    settings = TuneSettings(trials=3, trials_per_batch=1, population_size=16, seed=0,
                            pruner=PrunerSettings(verify_max=4),
                            checkpoint=str(REPO / "checkpoints" / "pacm.pt"),
                            measure=MeasureSettings(build_workers=1, min_repeat_ms=1))
    report, compiled = tune_network(torch_network(named_network("mlp"), "mlp"), tmp_path / "work", settings)

    printed = json.loads(report.to_json())
    assert {"end_to_end_latency_s", "tasks", "search_seconds", "cost_model_seconds"} <= printed.keys()
    # three fused dense layers, each its own task, each measured once by the shared cost model's run
    assert len(printed["tasks"]) == 3 and all(t["weight"] == 1 for t in printed["tasks"])
    assert all(t["name"].startswith("fused_matmul") for t in printed["tasks"])
    assert sum(t["trials"] for t in printed["tasks"]) == printed["trials"] == 3
    assert all(t["best_latency_s"] > 0 for t in printed["tasks"])
    assert 0 < printed["end_to_end_latency_s"] < 1 and printed["search_seconds"] > 0
    assert printed["cost_model_seconds"] > 0 and printed["output_max_abs_error"] < 1e-4
    # every task searched with the draft, PaCM verifying at most 4 survivors per measured batch
    breakdown = printed["cost_model_breakdown"]
    assert breakdown["model_search_s"] > 0 and 3 <= breakdown["features_full_programs"] <= 3 * 4
    assert (tmp_path / "work" / "database_tuning_record.json").stat().st_size > 0

    # a fresh input, and torch's own MLP with the same seeded weights
    torch.manual_seed(0)
    reference = MLP().eval()
    x = torch.randn(NETWORKS["mlp"][1], generator=torch.Generator().manual_seed(7))
    (got,) = compiled([x])
    with torch.no_grad():
        expected = reference(x).numpy()
    assert got.shape == expected.shape == (16, 10)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert not np.allclose(got, reference(-x).detach().numpy(), atol=1e-3)  # the check can tell outputs apart

    # run again with a budget of 4: the 3 measured count, 1 more is measured (tuning/run/resume.py)
    more = json.loads(tune_network(torch_network(named_network("mlp"), "mlp"), tmp_path / "work",
                                   replace(settings, trials=4))[0].to_json())
    assert more["resumed_trials"] == 3 and more["trials"] == 4 == sum(t["trials"] for t in more["tasks"])
    assert [t["name"] for t in more["tasks"]] == [t["name"] for t in printed["tasks"]]
    assert all(b["best_latency_s"] <= a["best_latency_s"] for a, b in zip(printed["tasks"], more["tasks"]))
    assert len((tmp_path / "work" / "database_tuning_record.json").read_text().splitlines()) == 4


def _tune(argv: list[str], tmp_path: Path, capsys) -> str:
    assert main(["tune", *argv, "--work-dir", str(tmp_path / "w"), "--trials", "1"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    return out.err


def test_an_unknown_network_is_refused_naming_the_built_in_ones(tmp_path, capsys):
    err = _tune(["--network", "resnet-1000"], tmp_path, capsys)
    assert "unknown network 'resnet-1000'" in err and "resnet18" in err and "bert-layer" in err


def test_missing_and_wrong_files_are_refused_as_exported_programs(tmp_path, capsys):
    assert "no such file" in _tune(["--exported-program", str(tmp_path / "none.pt2")], tmp_path, capsys)
    text = tmp_path / "model.pt2"
    text.write_text("not a zip")
    assert "not a torch.export.save archive" in _tune(["--exported-program", str(text)], tmp_path, capsys)
    state = tmp_path / "state.pt"  # torch.save writes a zip too: a state dict is the likely mix-up
    torch.save(MLP().state_dict(), state)
    assert "holds no exported program" in _tune(["--exported-program", str(state)], tmp_path, capsys)


def _saved(module: torch.nn.Module, path: Path, *args, **kwargs) -> Path:
    torch.export.save(torch.export.export(module, args, **kwargs), path)
    return path


class _Touch:
    """A pickle that creates a file when unpickled: the stand-in for code a hostile archive runs."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


def test_an_archive_with_a_code_running_pickle_is_refused_without_running_it(tmp_path, capsys):
    good = _saved(torch.nn.Linear(4, 2), tmp_path / "good.pt2", torch.randn(3, 4))
    assert isinstance(load_exported_program(good), torch.export.ExportedProgram)
    marker = tmp_path / "ran"
    hostile = tmp_path / "hostile.pt2"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(hostile, "w") as dst:
        for item in src.infolist():
            payload = src.read(item)
            if item.filename.endswith("sample_inputs/model.pt"):
                payload = pickle.dumps(_Touch(marker))
            dst.writestr(item, payload)
    err = _tune(["--exported-program", str(hostile)], tmp_path, capsys)
    assert "refusing to unpickle" in err and "sample_inputs/model.pt" in err
    assert not marker.exists()


def test_a_program_with_dynamic_shapes_is_refused(tmp_path, capsys):
    batch = torch.export.Dim("batch", min=2, max=64)
    path = _saved(torch.nn.Linear(4, 2), tmp_path / "dynamic.pt2", torch.randn(3, 4),
                  dynamic_shapes=({0: batch},))
    assert "dynamic shape" in _tune(["--exported-program", str(path)], tmp_path, capsys)


def test_a_cuda_network_run_without_a_gpu_says_so(tmp_path, capsys):
    import tvm

    if tvm.cuda(0).exist:
        pytest.skip("a GPU is visible: the CUDA path would tune for real")
    assert "no CUDA GPU is visible" in _tune(["--network", "mlp", "--target", "cuda"], tmp_path, capsys)
