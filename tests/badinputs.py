"""Generators of hostile but realistic inputs, one family per class of bad input.

Every fixture is built in a temporary directory from the bundled tenset-mini or a synthetic
store, so the corpus lives here as code rather than as files.
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from pathlib import Path
from typing import Callable

import h5py
import numpy as np
import torch

from pruner_offline.devices import DEVICES, device_to_json
from pruner_offline.store.schema import UnitFeatures
from pruner_offline.store.writer import write_store

BUNDLED_PACM = Path(__file__).resolve().parents[1] / "checkpoints" / "pacm.pt"  # on the current feature schema
# two pooling tasks of 23 and 24 records: real records that replay in a fraction of a second
POOL = "8c53ca2904398da2889aa7508082d7bb"


def pool_files(tenset_mini: Path) -> list[Path]:
    return sorted((tenset_mini / "measure_records" / "epyc-zen3").glob(f"*{POOL}*"))


def dataset(tenset_mini: Path, root: Path, files: dict[str, list[str]]) -> Path:
    """A TenSet dataset under ``root``: the real task pickles and record files holding ``lines``."""
    dev = root / "measure_records" / "dev"
    dev.mkdir(parents=True)
    os.symlink(tenset_mini / "network_info", root / "network_info")
    for name, lines in files.items():
        (dev / name).write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    return root


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def with_result(line: str, costs: list, error_no: int = 0) -> str:
    rec = json.loads(line)
    rec["r"][0], rec["r"][1] = costs, error_no
    return json.dumps(rec) + "\n"


def with_key(line: str, key: str) -> str:
    rec = json.loads(line)
    rec["i"][0][0] = key
    return json.dumps(rec) + "\n"


def damaged_gzip(lines: list[str], path: Path, keep: int) -> Path:
    """A gzip file whose deflate stream holds ``lines[:keep]`` and then a block of a reserved type."""
    c = zlib.compressobj(wbits=31)
    data = c.compress("".join(lines[:keep]).encode()) + c.flush(zlib.Z_FULL_FLUSH)
    path.write_bytes(data + b"\x07" + bytes(range(256)))  # BFINAL=1, BTYPE=11: "invalid block type"
    return path


def deeply_nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def metaschedule_db(root: Path, workloads: list[str], records: list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "database_workload.json").write_text("".join(w + "\n" for w in workloads))
    (root / "database_tuning_record.json").write_text("".join(r + "\n" for r in records))
    return root


def ms_record(workload: int, run_secs: list[float]) -> str:
    return json.dumps([workload, [[[], []], run_secs, {"kind": "cuda"}, []]])


# -- feature stores

def empty_unit(failures: list[tuple[int, str]], name: str = "t.json") -> UnitFeatures:
    arrays = {"line": np.zeros(0, np.int32), "position": np.zeros(0, np.int32), "label": np.zeros(0, np.float32),
              "cost": np.zeros(0), "error_no": np.zeros(0, np.int32), "stmt_count": np.zeros(0, np.int32),
              "draft_score": np.zeros(0, np.float32), "statements": np.zeros((0, 174), np.float32),
              "symbols": np.zeros((0, 11), np.float32), "dataflow": np.zeros((0, 8, 23), np.float32),
              "steps": np.zeros((0, 64, 37), np.float32)}
    return UnitFeatures(name, "dev", '["k"]', "llvm", arrays, failures, len(failures))


def store_without_records(path: Path, failures: list[tuple[int, str]], schema: str = "synthetic-1") -> Path:
    write_store(path, [(0, empty_unit(failures))], {"feature_schema": schema}, {})
    return path


def _replace(f: h5py.File, name: str, data) -> None:
    del f[name]
    f[name] = data


def _set(name: str, index, value) -> Callable[[h5py.File], None]:
    def damage(f: h5py.File) -> None:
        x, dtype = f[name][...], f[name].dtype
        x[index] = value
        del f[name]
        f.create_dataset(name, data=x, dtype=dtype)
    return damage


# what is damaged -> (how, the array the error must name)
STORE_DAMAGE: dict[str, tuple[Callable[[h5py.File], None], str]] = {
    "statement width": (lambda f: _replace(f, "statements", f["statements"][:, :100]), "statements"),
    "stmt_offset decreasing": (_set("records/stmt_offset", 3, 1), "records/stmt_offset"),
    "stmt_offset negative": (_set("records/stmt_offset", 1, -5), "records/stmt_offset"),
    "task_id out of range": (_set("records/task_id", 4, 99), "records/task_id"),
    "negative file_id": (_set("records/file_id", 0, -1), "records/file_id"),
    "label strings": (lambda f: _replace(f, "records/label", np.array([b"0.5"] * len(f["records/label"]))),
                      "records/label"),
    "2-D labels": (lambda f: _replace(f, "records/label", f["records/label"][...][:, None]), "records/label"),
    "missing tasks group": (lambda f: f.__delitem__("tasks"), "tasks"),
    "non-JSON network metadata": (_set("tasks/networks", 0, "{resnet: 1"), "tasks/networks"),
    "file paths as numbers": (lambda f: _replace(f, "files/path", np.arange(len(f["files/path"]))), "files/path"),
    "NaN statements": (_set("statements", (5, 3), np.nan), "statements"),
    "infinite symbols": (_set("symbols", (2, 0), np.inf), "symbols"),
    "infinite labels": (_set("records/label", 7, np.inf), "records/label"),
    "labels above 1": (_set("records/label", 7, 3.0), "records/label"),
    "NaN draft scores": (_set("records/draft_score", 1, np.nan), "records/draft_score"),
    "device constants as a name": (lambda f: f.attrs.__setitem__("devices", "epyc-7452"), "attribute devices"),
    "target kinds as a name": (lambda f: f.attrs.__setitem__("target_kinds", "llvm"), "attribute target_kinds"),
    "device constants with a text figure": (lambda f: f.attrs.__setitem__("devices", json.dumps(
        {"llvm": {**device_to_json(DEVICES["epyc-7452"]), "peak_gflops": "fast"}})), "peak_gflops is 'fast'"),
}


def damaged_store(good: Path, path: Path, damage: Callable[[h5py.File], None]) -> Path:
    shutil.copy(good, path)
    with h5py.File(path, "a") as f:
        damage(f)
    return path


# -- model files

def _first_float(state: dict) -> str:
    return next(k for k, v in state.items() if v.is_floating_point() and v.ndim == 2)


def _edit_model(edit: Callable[[dict], None]) -> Callable[[dict], dict]:
    def apply(obj: dict) -> dict:
        edit(obj)
        return obj
    return apply


# what is wrong -> (edit of the loaded model file, what the error must name)
MODEL_DAMAGE: dict[str, tuple[Callable[[dict], dict], str]] = {
    "no state dict": (_edit_model(lambda o: o.pop("state_dict")), "state_dict"),
    "state dict a list": (_edit_model(lambda o: o.__setitem__("state_dict", [1, 2])), "state_dict"),
    "unknown hyper-parameter": (_edit_model(lambda o: o["hparams"].__setitem__("dropout", 0.5)), "dropout"),
    "list hyper-parameter": (_edit_model(lambda o: o["hparams"].__setitem__("stmt_dim", [174])), "stmt_dim"),
    "enormous layer": (_edit_model(lambda o: o["hparams"].__setitem__("symbol_dim", 10 ** 9)), "symbol_dim"),
    "unknown model": (_edit_model(lambda o: o["hparams"].__setitem__("model", "gpt")), "gpt"),
    "wrong tensor shape": (_edit_model(lambda o: o["state_dict"].__setitem__(
        _first_float(o["state_dict"]), torch.zeros(3, 3))), "state_dict"),
    "NaN weights": (_edit_model(lambda o: o["state_dict"][_first_float(o["state_dict"])].fill_(float("nan"))),
                    "not finite"),
    "correction scale out of range": (_edit_model(lambda o: o["state_dict"].__setitem__(
        "correction_scale", torch.tensor(7.0))), "correction_scale is 7.0"),
    "correction scale hyper-parameter out of range": (
        _edit_model(lambda o: o["hparams"].__setitem__("correction_scale", -1.0)), "correction_scale must be in"),
    # adapt and tune built DeviceConstants from them and failed with a TypeError
    "device constants without their figures": (_edit_model(lambda o: o["meta"].__setitem__(
        "devices", {"llvm": {"name": "epyc-7452"}})), "devices['llvm']: device constants lack is_gpu"),
    "no cores": (_edit_model(lambda o: o["meta"].__setitem__(
        "devices", {"llvm": {**device_to_json(DEVICES["epyc-7452"]), "num_units": 0}})),
        "num_units is 0, expected a positive number"),
}


def damaged_model(good: Path, path: Path, edit: Callable[[dict], dict]) -> Path:
    torch.save(edit(torch.load(good, weights_only=True)), path)
    return path


class RunsCode:
    """Unpickling this runs ``touch victim``: what a malicious file would do."""

    def __init__(self, victim: Path):
        self.victim = victim

    def __reduce__(self):
        return (os.system, (f"touch {self.victim}",))


def truncated(good: Path, path: Path) -> Path:
    path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    return path
