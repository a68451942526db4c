"""The model file users load into tuning runs: weights, scales, hyper-parameters, feature schema,
and how the training features were made (device constants, data fingerprint, split).

Plain tensors and values only, read back with ``torch.load(weights_only=True)``: a model file
from elsewhere cannot run code when loaded. Neural models keep a state dict; the gradient-boosted
trees baseline keeps its tree arrays (``GBDT_FORMAT``).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

import torch

from ..atomic import atomic_write
from ..errors import BadInput, why_not_loaded
from ..features.schema import extractable_schemas
from .module import CostModelModule, TrainingDiverged

if TYPE_CHECKING:
    from .gbdt_module import GBDTModule

MODEL_FORMAT = "pruner-offline-model/1"
GBDT_FORMAT = "pruner-offline-gbdt/1"


class ModelFileError(BadInput):
    pass


# hyper-parameters a model file may carry, with their types; integer ones are layer widths, kept small
# enough that a hostile file cannot make the loader allocate without bound
_HPARAMS = {k: type(p.default) for k, p in inspect.signature(CostModelModule.__init__).parameters.items()
            if k != "self"}
_MAX_WIDTH = 1 << 16


def _non_finite(state: dict) -> int:
    return sum(int((~torch.isfinite(v)).sum()) for v in state.values() if v.is_floating_point())


def export_model(module: CostModelModule, path: Union[str, Path], meta: Optional[dict] = None) -> Path:
    path = Path(path)
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    bad = _non_finite(state)
    if bad:
        total = sum(v.numel() for v in state.values() if v.is_floating_point())
        raise TrainingDiverged(f"{path}: not written: {bad} of {total} weights are not finite (training diverged; "
                               "check the training data, or lower the learning rate)")
    return _save({"format": MODEL_FORMAT, "hparams": dict(module.hparams), "state_dict": state, "meta": meta or {}},
                 path)


def _save(obj: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as tmp:  # a reader never sees half a file
        torch.save(obj, tmp)
    return path


def export_gbdt(module: "GBDTModule", path: Union[str, Path], meta: Optional[dict] = None) -> Path:
    e = module.ensemble
    return _save({"format": GBDT_FORMAT, "hparams": dict(module.hparams), "meta": meta or {},
                  "trees": {k: torch.from_numpy(v) for k, v in e.arrays().items()},
                  "baseline": e.baseline, "n_features": e.n_features}, Path(path))


def _gbdt(path: Union[str, Path], obj: dict) -> "GBDTModule":
    from ..models.gbdt import TreeEnsemble
    from .gbdt_module import GBDTModule

    try:
        trees = {k: v.numpy() for k, v in obj["trees"].items()}
        ensemble = TreeEnsemble.from_arrays(trees, obj["baseline"], obj["n_features"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelFileError(f"{path}: damaged gradient-boosted trees ({type(exc).__name__}: {exc})") from None
    return GBDTModule(ensemble, str(obj["hparams"].get("feature_schema", "")))


def _check_hparams(path: Union[str, Path], hparams: dict) -> None:
    for k, v in hparams.items():
        want = _HPARAMS.get(k)
        if want is None:
            raise ModelFileError(f"{path}: hparams: unknown hyper-parameter {k!r}")
        if not (type(v) is want or (want is float and type(v) is int)):
            raise ModelFileError(f"{path}: hparams: {k} is {v!r}, expected type {want.__name__}")
        if want is int and not 0 < v <= _MAX_WIDTH:
            raise ModelFileError(f"{path}: hparams: {k} is {v}, expected 1..{_MAX_WIDTH}")


def check_schema(path: Union[str, Path], schema: object, expect: Union[str, tuple[str, ...]]) -> None:
    """Refuse features of schema ``expect`` for the model file ``path``, trained on ``schema``, if they
    differ; ``expect`` a tuple: the schemas this version extracts, of which the model's must be one."""
    if isinstance(expect, tuple):
        if schema not in expect:
            raise ModelFileError(
                f"{path} was trained on features of schema {schema!r}, and this version extracts schema "
                f"{' or '.join(expect)}: retrain (pruner-train pretrain) on data featurized by this version")
    elif schema != expect:
        raise ModelFileError(
            f"{path} was trained on features of schema {schema!r} but these features are {expect!r}: "
            "featurize the data with the feature schema the model was trained on (pruner-train featurize "
            "--feature-schema), or retrain (pruner-train pretrain) on data featurized by this version")


def model_schema(module, path: Union[str, Path] = "the model") -> int:
    """The feature schema a loaded model reads; one this version cannot extract is refused."""
    schema = str(module.hparams.get("feature_schema", ""))
    check_schema(path, schema, extractable_schemas())
    return int(schema)


def load_model(path: Union[str, Path], expect_schema: Union[None, str, tuple[str, ...]] = None
               ) -> tuple[Union[CostModelModule, "GBDTModule"], dict]:
    """(module in eval mode, meta). Refuses files of another format or feature schema, and files whose
    contents do not make a working model."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - unpickling errors come in many types
        raise ModelFileError(f"{path}: not a loadable model file ({why_not_loaded(exc)})") from None
    if not isinstance(obj, dict) or obj.get("format") not in (MODEL_FORMAT, GBDT_FORMAT):
        raise ModelFileError(f"{path}: not a pruner-offline model file (format {obj.get('format') if isinstance(obj, dict) else None!r})")
    trees = obj["format"] == GBDT_FORMAT
    hparams, state, meta = obj.get("hparams"), obj.get("trees" if trees else "state_dict"), obj.get("meta", {})
    for name, value in (("hparams", hparams), ("trees" if trees else "state_dict", state), ("meta", meta)):
        if not isinstance(value, dict):
            raise ModelFileError(f"{path}: {name} is {type(value).__name__}, expected a mapping")
    _check_hparams(path, hparams)
    _check_devices(path, meta)
    if expect_schema is not None:
        check_schema(path, hparams.get("feature_schema"), expect_schema)
    if trees:
        return _gbdt(path, obj).eval(), meta
    try:
        module = CostModelModule(**hparams)
        # files from before the buffer: the scale their hyper-parameters say (1: the correction whole)
        module.load_state_dict({"correction_scale": module.correction_scale, **state})
    except (ValueError, RuntimeError, TypeError) as exc:
        raise ModelFileError(f"{path}: state_dict does not fit the model its hparams describe "
                             f"({' '.join(str(exc).split())[:300]})") from None
    if _non_finite(module.state_dict()):
        raise ModelFileError(f"{path}: state_dict: holds weights that are not finite (NaN or infinite)")
    if not 0.0 <= float(module.correction_scale) <= 1.0:
        raise ModelFileError(f"{path}: state_dict: correction_scale is {float(module.correction_scale)}, expected 0..1")
    module.eval()
    return module, meta


def recorded_devices(meta: dict) -> dict[str, dict]:
    """Target kind -> the device constants the model's training features were made with ({} if unknown;
    load_model has checked them)."""
    devices = meta.get("devices")
    return devices if isinstance(devices, dict) else {}


def _check_devices(path: Union[str, Path], meta: dict) -> None:
    from ..devices import device_from_json

    for kind, d in recorded_devices(meta).items():
        try:
            device_from_json(d)
        except ValueError as exc:
            raise ModelFileError(f"{path}: meta: devices[{kind!r}]: {exc}") from None


def trained_on_other_kinds(meta: dict, kinds) -> list[str]:
    """The target kinds the model was trained on, when it recorded some and none of ``kinds``
    (a cross-target use); [] otherwise."""
    trained = list(recorded_devices(meta))
    return trained if trained and not set(trained) & set(kinds) else []


def model_device(target_kind: str, model_files: dict[str, dict], device=None, option: str = "--device",
                 other_kinds: bool = False):
    """The draft-score constants for ``target_kind`` programs scored by the models whose metas are
    ``model_files`` (path -> meta): the models' own; ``device`` (given as ``option``) only where it
    agrees with them or they recorded none. A model of other target kinds is refused unless
    ``other_kinds`` (adapting a model to another target is a use of its own)."""
    from ..devices import DeviceConstants, device_for, device_from_json, differences

    recorded: dict[str, DeviceConstants] = {}
    for path, meta in model_files.items():
        devices = recorded_devices(meta)
        if devices and target_kind not in devices and not other_kinds:
            raise ModelFileError(f"{path} was trained on {', '.join(sorted(devices))} programs, not {target_kind}: "
                                 f"use a model trained on {target_kind} records (pruner-train pretrain --data ...)")
        if target_kind in devices:
            recorded[path] = device_from_json(devices[target_kind])
    if len(set(recorded.values())) > 1:
        raise ModelFileError("the models were trained with different device constants: "
                             + ", ".join(f"{p}: {d.name}" for p, d in recorded.items()))
    if device is not None:
        chosen = device_for(target_kind, device)
        if recorded and chosen != next(iter(recorded.values())):
            path, own = next(iter(recorded.items()))
            raise ModelFileError(f"{option} {chosen.name}, but {path} was trained with the constants of {own.name}"
                                 f"{differences(chosen, own, 'here', 'in the model')}: leave {option} out to use "
                                 "the model's own")
        return chosen
    return next(iter(recorded.values())) if recorded else device_for(target_kind)


def check_same_devices(model: Union[str, Path], model_meta: dict, data: Union[str, Path], data_devices: dict) -> None:
    """Refuse features made with other device constants than the model's, for any target kind both have.

    The draft score (and the learned draft model reading it) depends on the constants: features of
    another device would be scored on a scale the model never saw.
    """
    from ..devices import describe_devices, device_from_json, differences

    mine = recorded_devices(model_meta)
    # as read back: a file made before a constant existed holds none, which reads as its default
    ours = {k: device_from_json(d) for k, d in mine.items()}
    theirs = {k: device_from_json(d) for k, d in data_devices.items() if k in ours}
    clash = sorted(k for k in theirs if ours[k] != theirs[k])
    if clash:
        kind = clash[0]
        model_dev, data_dev = ours[kind], theirs[kind]
        raise ModelFileError(
            f"{data} was featurized with the {kind} constants of {data_dev.name!r}, but {model} was trained "
            f"with those of {model_dev.name!r}{differences(data_dev, model_dev, 'in the data', 'in the model')}: "
            f"featurize again with --{'gpu' if kind == 'cuda' else 'cpu'} {model_dev.name} "
            f"(model: {describe_devices(mine)})")
