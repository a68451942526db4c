"""Train every model on one split with one seed and score them side by side."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..models.gbdt import TreeEnsemble, fit_gbdt, pooled_features
from ..models.registry import MODEL_NAMES, model_spec
from ..store.reader import FeatureStore
from .evaluate import evaluate_module, reference_metrics, split_data
from .export import export_gbdt
from .gbdt_module import GBDTModule
from .run import PretrainResult, pretrain, training_meta


def train_gbdt(store: Path, split: str, seed: int, out_dir: Optional[Path] = None) -> PretrainResult:
    """Fit the trees; the model file is written to ``out_dir/gbdt.pt`` when ``out_dir`` is given."""
    dm = split_data(store, split, seed)
    train = dm.read(np.concatenate([dm.train_rows, dm.val_rows]))
    start = time.perf_counter()
    fitted = fit_gbdt(pooled_features(train.statements, train.records["stmt_count"]), train.records["label"], seed)
    seconds = time.perf_counter() - start
    module = GBDTModule(TreeEnsemble.from_sklearn(fitted), str(FeatureStore(store).meta.get("feature_schema", "")))
    evaluation = evaluate_module(module, dm)
    model_file = None
    if out_dir is not None:
        model_file = export_gbdt(module, out_dir / "gbdt.pt", training_meta(store, split, seed, evaluation, dm, seconds))
    return PretrainResult("gbdt", model_file, evaluation, seconds, 0, lambda: reference_metrics(dm, dm.test_rows, seed))


def train_models(store: Path, split: str, out_dir: Path, models: Sequence[str], *, seed: int = 0,
                 max_epochs: Optional[int] = None, feature_schema: str = "", progress: bool = False,
                 quiet: bool = False, **lightning) -> tuple[dict[str, dict], Optional[PretrainResult]]:
    """Train each of ``models`` on one split and write ``out_dir/<model>.pt``; ``lightning``: the
    Trainer's launch settings and extra recipes (``pretrain``'s keywords), for all but gbdt.
    Returns a row per model (test metrics, seconds, model file; or ``skipped`` and why, for a model
    the store cannot feed) and the last result, whose reference rows score the same test records;
    None where nothing was trained here (all skipped, or another rank of a multi-process run)."""
    results: dict[str, dict] = {}
    last: Optional[PretrainResult] = None
    has_steps = FeatureStore(store).has_step_vectors()
    for name in models:
        spec = model_spec(name)
        if spec.reads_steps and not has_steps:
            # TLP reads only the Ansor steps: trained on the zeros a MetaSchedule store holds, it
            # would be written as a model file that ranks nothing
            results[name] = {"skipped": "no Ansor steps in this store (MetaSchedule traces): TLP has nothing to read"}
            continue
        r = (train_gbdt(store, split, seed, out_dir) if spec.network is None else
             pretrain(store, name, split, out_dir, max_epochs=max_epochs, seed=seed,
                      feature_schema=feature_schema, progress=progress, quiet=quiet, **lightning))
        if r is None:  # another rank of a multi-process run: rank 0 reports
            continue
        results[name] = {**r.evaluation.to_json(), "train_seconds": round(r.train_seconds, 2),
                         "checkpoint": str(r.model_file)}
        last = r
    return results, last


def compare(store: Path, split: str, out_dir: Path, seed: int = 0, models: Sequence[str] = MODEL_NAMES,
            max_epochs: Optional[int] = None, feature_schema: str = "",
            progress: bool = False, quiet: bool = False) -> tuple[dict[str, dict], dict[str, dict]]:
    """(test metrics and seconds per model, the reference rows on the same test records)."""
    results, last = train_models(store, split, out_dir, models, seed=seed, max_epochs=max_epochs,
                                 feature_schema=feature_schema, progress=progress, quiet=quiet)
    return results, (last.reference if last is not None else {})
