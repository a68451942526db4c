"""Adapting a model from stores of a device's records, as `pruner-train adapt` does it: the stores
checked against the model, the records ordered as a tuning run would measure them, part held out
to score on, every method replayed over them (simulate.py), and the adapted models written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..errors import BadInput
from ..features import DeviceConstants
from ..devices import device_to_json
from ..store.reader import FeatureStore, StoreData
from ..training.export import check_same_devices, check_schema, export_model
from ..training.module import CostModelModule
from .model_file import adapted_meta
from .online import OnlineProgram, OnlineRecords, programs_of_store
from .simulate import held_out_rows, tuning_order


def check_adapt_store(store: Path, checkpoint: Path, module: CostModelModule, target: str,
                      device: DeviceConstants) -> StoreData:
    """The store's records, refused unless the model can adapt with them: its feature schema,
    records there at all, of the target kind only, featurized with the device's constants."""
    check_schema(checkpoint, module.hparams.get("feature_schema"),
                 str(FeatureStore(store).meta.get("feature_schema", "")))
    st = FeatureStore(store)
    data = st.load()
    if not data.n_records:
        raise BadInput(f"{store}: holds no records to adapt with ({st.failure_note() or 'none'})")
    kinds = {k.rpartition("|")[2] for k in data.task_keys}
    if kinds - {target}:
        raise BadInput(f"{store} holds {', '.join(sorted(kinds))} records, but --target is "
                       f"{target}: adapt to the device the records were measured on")
    check_same_devices(f"{checkpoint} (adapting with {device.name})", {"devices": {target: device_to_json(device)}},
                       store, st.meta.get("devices", {}))
    return data


def online_stream(online: StoreData, heldout: Optional[StoreData],
                  eval_fraction: float) -> tuple[list[OnlineProgram], Optional[StoreData]]:
    """The programs in the order a tuning run measures them, and what is scored: ``heldout``, or
    without it the last ``eval_fraction`` of each task's records, which the stream then leaves out."""
    order = tuning_order(online)
    if heldout is None and eval_fraction > 0:
        held = held_out_rows(online, eval_fraction)
        heldout = OnlineRecords(programs_of_store(online, np.flatnonzero(held))).data()
        order = order[~held[order]]
    return programs_of_store(online, order), heldout


@dataclass(frozen=True)
class WrittenModel:
    method: str
    path: Path
    retrains: int
    chosen: Optional[str]  # guarded: the model it predicts with


def write_adapted(methods: list, checkpoint: Path, records: Path, target: str, device: DeviceConstants,
                  n_online: int, save: Optional[Path], out: Path) -> list[WrittenModel]:
    """Each adapted method's model as a model file (``save``, or OUT/adapted_METHOD.pt). frozen is
    the pretrained model itself: a copy of it would only mislead, so none is written."""
    written = []
    for m in methods:
        if m.name == "frozen":
            continue
        path = save or out / f"adapted_{m.name}.pt"
        export_model(m.predictor, path, {**adapted_meta(str(records), m, target, device, n_online),
                                         "pretrained": str(checkpoint)})
        written.append(WrittenModel(m.name, path, m.retrains, getattr(m, "chosen", None)))
    return written
