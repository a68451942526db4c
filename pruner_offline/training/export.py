"""The model file users load into tuning runs: weights, scales, hyper-parameters, feature schema.

Plain tensors and values only, read back with ``torch.load(weights_only=True)``: a model file
from elsewhere cannot run code when loaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

import torch

from .module import CostModelModule

MODEL_FORMAT = "pruner-offline-model/1"


class ModelFileError(ValueError):
    pass


def export_model(module: CostModelModule, path: Union[str, Path], meta: Optional[dict] = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": MODEL_FORMAT, "hparams": dict(module.hparams),
                "state_dict": {k: v.detach().cpu() for k, v in module.state_dict().items()},
                "meta": meta or {}}, tmp)
    os.replace(tmp, path)  # a reader never sees half a file
    return path


def load_model(path: Union[str, Path], expect_schema: Optional[str] = None) -> tuple[CostModelModule, dict]:
    """(module in eval mode, meta). Refuses files of another format or feature schema."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - unpickling errors come in many types
        raise ModelFileError(f"{path}: not a loadable model file ({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, dict) or obj.get("format") != MODEL_FORMAT:
        raise ModelFileError(f"{path}: not a pruner-offline model file (format {obj.get('format') if isinstance(obj, dict) else None!r})")
    hparams = obj["hparams"]
    schema = hparams.get("feature_schema")
    if expect_schema is not None and schema != expect_schema:
        raise ModelFileError(
            f"{path} was trained on features of schema {schema!r} but these features are {expect_schema!r}: "
            "featurize the data with the toolkit version that trained the model, or retrain "
            "(pruner-train pretrain) on data featurized by this version")
    module = CostModelModule(**hparams)
    module.load_state_dict(obj["state_dict"])
    module.eval()
    return module, obj.get("meta", {})
