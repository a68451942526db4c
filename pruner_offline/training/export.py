"""The model file users load into tuning runs: weights, scales, hyper-parameters, feature schema,
and how the training features were made (device constants, data fingerprint, split).

Plain tensors and values only, read back with ``torch.load(weights_only=True)``: a model file
from elsewhere cannot run code when loaded. Neural models keep a state dict; the gradient-boosted
trees baseline keeps its tree arrays (``GBDT_FORMAT``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

import torch

if TYPE_CHECKING:  # Lightning is imported when a model is built, not by whoever catches ModelFileError
    from .gbdt_module import GBDTModule
    from .module import CostModelModule

MODEL_FORMAT = "pruner-offline-model/1"
GBDT_FORMAT = "pruner-offline-gbdt/1"


class ModelFileError(ValueError):
    pass


def _save(obj: dict, path: Union[str, Path]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)  # a reader never sees half a file
    return path


def export_model(module: "CostModelModule", path: Union[str, Path], meta: Optional[dict] = None) -> Path:
    return _save({"format": MODEL_FORMAT, "hparams": dict(module.hparams),
                  "state_dict": {k: v.detach().cpu() for k, v in module.state_dict().items()},
                  "meta": meta or {}}, path)


def export_gbdt(module: "GBDTModule", path: Union[str, Path], meta: Optional[dict] = None) -> Path:
    e = module.ensemble
    return _save({"format": GBDT_FORMAT, "hparams": dict(module.hparams), "meta": meta or {},
                  "trees": {k: torch.from_numpy(v) for k, v in e.arrays().items()},
                  "baseline": e.baseline, "n_features": e.n_features}, path)


def _gbdt(path: Union[str, Path], obj: dict) -> "GBDTModule":
    from ..models.gbdt import TreeEnsemble
    from .gbdt_module import GBDTModule

    try:
        trees = {k: v.numpy() for k, v in obj["trees"].items()}
        ensemble = TreeEnsemble.from_arrays(trees, obj["baseline"], obj["n_features"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelFileError(f"{path}: damaged gradient-boosted trees ({type(exc).__name__}: {exc})") from None
    return GBDTModule(ensemble, str(obj["hparams"].get("feature_schema", "")))


def load_model(path: Union[str, Path], expect_schema: Optional[str] = None
               ) -> tuple[Union["CostModelModule", "GBDTModule"], dict]:
    """(module in eval mode, meta). Refuses files of another format or feature schema."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - unpickling errors come in many types
        raise ModelFileError(f"{path}: not a loadable model file ({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, dict) or obj.get("format") not in (MODEL_FORMAT, GBDT_FORMAT):
        raise ModelFileError(f"{path}: not a pruner-offline model file (format {obj.get('format') if isinstance(obj, dict) else None!r})")
    hparams = obj["hparams"]
    schema = hparams.get("feature_schema")
    if expect_schema is not None and schema != expect_schema:
        raise ModelFileError(
            f"{path} was trained on features of schema {schema!r} but these features are {expect_schema!r}: "
            "featurize the data with the toolkit version that trained the model, or retrain "
            "(pruner-train pretrain) on data featurized by this version")
    if obj["format"] == GBDT_FORMAT:
        return _gbdt(path, obj).eval(), obj.get("meta", {})
    from .module import CostModelModule

    module = CostModelModule(**hparams)
    module.load_state_dict(obj["state_dict"])
    module.eval()
    return module, obj.get("meta", {})


def recorded_devices(meta: dict) -> dict[str, dict]:
    """Target kind -> the device constants the model's training features were made with ({} if unknown)."""
    devices = meta.get("devices")
    return devices if isinstance(devices, dict) else {}


def check_same_devices(model: Union[str, Path], model_meta: dict, data: Union[str, Path], data_devices: dict) -> None:
    """Refuse features made with other device constants than the model's, for any target kind both have.

    The draft score (and the learned draft model reading it) depends on the constants: features of
    another device would be scored on a scale the model never saw.
    """
    from ..features.devices import describe_devices

    mine = recorded_devices(model_meta)
    clash = sorted(k for k in set(mine) & set(data_devices) if mine[k] != data_devices[k])
    if clash:
        kind = clash[0]
        raise ModelFileError(
            f"{data} was featurized with the {kind} constants of {data_devices[kind].get('name')!r}, but {model} "
            f"was trained with those of {mine[kind].get('name')!r}: featurize again with "
            f"--{'gpu' if kind == 'cuda' else 'cpu'} {mine[kind].get('name')} (model: {describe_devices(mine)})")
