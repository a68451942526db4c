"""Train every model on one split with one seed and score them side by side."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..models.gbdt import fit_gbdt, pooled_features
from ..models.registry import MODEL_NAMES
from ..store.reader import FeatureStore
from .evaluate import evaluate_predictions, split_data
from .run import pretrain


def train_gbdt(store: Path, split: str, seed: int) -> tuple[dict, float]:
    dm = split_data(store, split, seed)
    rec = dm.data.records
    train = np.concatenate([dm.train_rows, dm.val_rows])
    start = time.perf_counter()
    model = fit_gbdt(pooled_features(dm.data.statements, rec["stmt_offset"], train), rec["label"][train], seed)
    seconds = time.perf_counter() - start
    pred = model.predict(pooled_features(dm.data.statements, rec["stmt_offset"], dm.test_rows))
    return evaluate_predictions(pred, dm, dm.test_rows).to_json(), seconds


def compare(store: Path, split: str, out_dir: Path, seed: int = 0, models: Sequence[str] = MODEL_NAMES,
            max_epochs: Optional[int] = None, feature_schema: str = "", progress: bool = False) -> dict[str, dict]:
    results: dict[str, dict] = {}
    has_steps = FeatureStore(store).has_step_vectors()
    for name in models:
        if name == "tlp" and not has_steps:
            results[name] = {"skipped": "no Ansor steps in this store (MetaSchedule traces): TLP has nothing to read"}
            continue
        if name == "gbdt":
            metrics, seconds = train_gbdt(store, split, seed)
        else:
            r = pretrain(store, name, split, out_dir, max_epochs=max_epochs, seed=seed,
                         feature_schema=feature_schema, progress=progress)
            metrics, seconds = r.evaluation.to_json(), r.train_seconds
        results[name] = {**metrics, "train_seconds": round(seconds, 2)}
    return results
