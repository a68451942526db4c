"""`tune --onnx`: a two-layer MLP written with onnx.helper tuned end to end and checked against the
same MLP in numpy; and the files, shapes and missing package `--onnx` must refuse with one line."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from pruner_offline.cli import main
from pruner_offline.tuning.run.network import tune_network
from pruner_offline.measure.settings import MeasureSettings
from pruner_offline.tuning.settings import PrunerSettings, TuneSettings

from conftest import REPO


@pytest.fixture
def onnx():
    return pytest.importorskip("onnx", reason="the onnx package is not installed (pip install 'pruner-offline[onnx]')")


SIZES = (32, 24, 8)


def _weights(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    (n_in, hidden, n_out) = SIZES
    return [rng.standard_normal((n_in, hidden), np.float32) / np.float32(np.sqrt(n_in)),
            rng.standard_normal(hidden, np.float32),
            rng.standard_normal((hidden, n_out), np.float32) / np.float32(np.sqrt(hidden)),
            rng.standard_normal(n_out, np.float32)]


def _mlp_numpy(x: np.ndarray) -> np.ndarray:
    w1, b1, w2, b2 = _weights()
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def _mlp_onnx(path: Path, batch: int | str = 4) -> Path:
    """x[batch, 32] -> MatMul, Add, Relu -> MatMul, Add -> y[batch, 8], weights as initializers."""
    from onnx import TensorProto, helper, numpy_helper, save  # callers hold the onnx fixture

    names = ("w1", "b1", "w2", "b2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]), helper.make_node("MatMul", ["h2", "w2"], ["h3"]),
             helper.make_node("Add", ["h3", "b2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, SIZES[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, SIZES[-1]])],
        initializer=[numpy_helper.from_array(w, n) for w, n in zip(_weights(), names)])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _settings(**kwargs) -> TuneSettings:
    return TuneSettings(trials=2, trials_per_batch=1, population_size=16, seed=0, pruner=PrunerSettings(verify_max=4),
                        num_cores=1,
                        checkpoint=str(REPO / "checkpoints" / "pacm.pt"),
                        measure=MeasureSettings(build_workers=1, min_repeat_ms=1), **kwargs)


def test_an_onnx_mlp_tunes_end_to_end_and_computes_what_numpy_computes(onnx, tmp_path):
    from pruner_offline.tuning.frontends.onnx_model import onnx_network

    torch.set_num_threads(1)
    network = onnx_network(_mlp_onnx(tmp_path / "mlp.onnx"))
    report, compiled = tune_network(network, tmp_path / "work", _settings())

    printed = json.loads(report.to_json())
    assert printed["network"] == str(tmp_path / "mlp.onnx")
    # two fused dense layers (MatMul+Add+Relu, MatMul+Add), one task each, each measured once
    assert [t["weight"] for t in printed["tasks"]] == [1, 1]
    assert all(t["name"].startswith("fused_matmul") and t["trials"] == 1 for t in printed["tasks"])
    assert printed["trials"] == 2 and all(t["best_latency_s"] > 0 for t in printed["tasks"])
    assert 0 < printed["end_to_end_latency_s"] < 1 and printed["search_seconds"] > 0
    assert printed["cost_model_seconds"] > 0
    assert printed["output_max_abs_error"] < 1e-4  # vs onnx's reference evaluator, on a seeded random input
    assert (tmp_path / "work" / "database_tuning_record.json").stat().st_size > 0

    x = np.random.default_rng(7).standard_normal((4, SIZES[0]), np.float32)
    (got,) = compiled([x])
    expected = _mlp_numpy(x)
    assert got.shape == expected.shape == (4, 8)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert not np.allclose(got, _mlp_numpy(-x), atol=1e-3)  # the check can tell outputs apart
    (evaluated,) = network.reference([x])  # what output_max_abs_error compares with is this MLP too
    np.testing.assert_allclose(evaluated, expected, rtol=1e-5, atol=1e-5)


def test_a_dynamic_batch_tunes_from_the_command_line_at_the_shape_given(onnx, tmp_path, capsys):
    model = _mlp_onnx(tmp_path / "dynamic.onnx", batch="N")
    argv = ["tune", "--onnx", str(model), "--work-dir", str(tmp_path / "w"), "--trials", "1", "--cores", "1",
            "--population", "16", "--seed", "0", "--cost-model", "random"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "input x has a dynamic shape ['N', 32]" in err and "--input-shape x=1x32" in err

    assert main([*argv, "--input-shape", "x=3x32"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"end_to_end_latency_s", "tasks", "search_seconds", "cost_model_seconds"} <= printed.keys()
    assert printed["trials"] == 1 and len(printed["tasks"]) == 2
    assert printed["end_to_end_latency_s"] > 0 and printed["output_max_abs_error"] < 1e-4


def _refused(argv: list[str], tmp_path: Path, capsys) -> str:
    assert main(["tune", *argv, "--work-dir", str(tmp_path / "w"), "--trials", "1"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "Traceback" not in out.err
    return out.err


def test_missing_and_wrong_files_are_refused_as_onnx_models(onnx, tmp_path, capsys):
    assert "no such file" in _refused(["--onnx", str(tmp_path / "none.onnx")], tmp_path, capsys)
    text = tmp_path / "text.onnx"
    text.write_text("not a model at all\n")
    assert "not a valid ONNX model" in _refused(["--onnx", str(text)], tmp_path, capsys)
    state = tmp_path / "state.onnx"  # a torch state dict given as a model: the likely mix-up
    torch.save(torch.nn.Linear(4, 2).state_dict(), state)
    assert "not a valid ONNX model" in _refused(["--onnx", str(state)], tmp_path, capsys)


def test_input_shapes_that_do_not_fit_the_model_are_refused(onnx, tmp_path, capsys):
    fixed = _mlp_onnx(tmp_path / "mlp.onnx")
    err = _refused(["--onnx", str(fixed), "--input-shape", "x=4x31"], tmp_path, capsys)
    assert "x=4x31 does not fit the model's shape [4, 32]" in err
    err = _refused(["--onnx", str(fixed), "--input-shape", "images=1x3x8x8"], tmp_path, capsys)
    assert "names images, not inputs of the model (its inputs: x)" in err
    assert "give it with --onnx" in _refused(["--network", "mlp", "--input-shape", "x=4x32"], tmp_path, capsys)
    with pytest.raises(SystemExit):
        main(["tune", "--onnx", str(fixed), "--input-shape", "x=4xa", "--work-dir", str(tmp_path)])
    assert "expected NAME=DIMS" in capsys.readouterr().err


def test_without_the_onnx_package_onnx_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    model = tmp_path / "mlp.onnx"
    model.write_bytes(b"\x08\x08")  # never read: the missing package is reported first
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` now raises ImportError
    err = _refused(["--onnx", str(model)], tmp_path, capsys)
    assert "needs the onnx package" in err and "pip install 'pruner-offline[onnx]'" in err


def test_an_op_tvm_lacks_is_refused_naming_it(onnx, tmp_path, capsys):
    from onnx import TensorProto, helper

    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "xy")
    graph = helper.make_graph([helper.make_node("Celu", ["x"], ["y"])], "celu", [x], [y])
    path = tmp_path / "celu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    onnx.checker.check_model(onnx.load(path))  # a valid model: only TVM's frontend lacks the op
    err = _refused(["--onnx", str(path)], tmp_path, capsys)
    assert "TVM's Relax ONNX frontend cannot import it" in err and "Celu" in err


def test_weights_stored_outside_the_models_directory_are_not_read(onnx, tmp_path, capsys):
    # An external-data entry is a path the file names: a hostile one reaches for files elsewhere.
    (tmp_path / "secret.bin").write_bytes(np.arange(SIZES[0] * SIZES[1], dtype=np.float32).tobytes())
    model = onnx.load(_mlp_onnx(tmp_path / "mlp.onnx"))
    w1 = next(t for t in model.graph.initializer if t.name == "w1")
    w1.ClearField("raw_data")
    w1.ClearField("float_data")
    w1.data_location = onnx.TensorProto.EXTERNAL
    w1.external_data.add(key="location", value="../secret.bin")
    (tmp_path / "models").mkdir()
    onnx.save(model, tmp_path / "models" / "hostile.onnx")
    err = _refused(["--onnx", str(tmp_path / "models" / "hostile.onnx")], tmp_path, capsys)
    assert "not a valid ONNX model" in err and "secret.bin" in err
