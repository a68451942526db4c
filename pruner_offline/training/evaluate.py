"""Score a trained model on a store's test split: metrics, a per-task table, and plots."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ..models.metrics import peak_score, ranking_report
from ..models.registry import model_spec
from .data import StoreDataModule
from .export import check_same_devices, load_model, trained_on_other_kinds
from .lightning_voice import lightning_voice
from .module import CostModelModule


@dataclass
class Evaluation:
    metrics: dict[str, float]
    records: int
    tasks: int
    pred: np.ndarray
    rows: np.ndarray

    def to_json(self) -> dict:
        return {**{k: round(v, 6) for k, v in self.metrics.items()}, "records": self.records, "tasks": self.tasks}


def split_data(store: Path, split: str, seed: int = 0, feature_schema: Optional[str] = None,
               with_steps: bool = False) -> StoreDataModule:
    dm = StoreDataModule(str(store), split=split, seed=seed, feature_schema=feature_schema, with_steps=with_steps)
    dm.setup("test")
    return dm


def predict(module: CostModelModule, dm: StoreDataModule, rows: np.ndarray) -> np.ndarray:
    """The module's scores of records ``rows`` from Lightning's predict loop (eval and inference
    mode), on the device the module is on."""
    import lightning as L

    on_gpu = module.device.type == "cuda"
    with lightning_voice(True):
        trainer = L.Trainer(accelerator="gpu" if on_gpu else "cpu", devices=1, logger=False,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
        out = trainer.predict(module, dataloaders=dm.rows_dataloader(rows))
    return torch.cat(out).float().cpu().numpy() if out else np.zeros(0, np.float32)


def evaluate_module(module: CostModelModule, dm: StoreDataModule, rows: Optional[np.ndarray] = None) -> Evaluation:
    rows = dm.test_rows if rows is None else rows
    return evaluate_predictions(predict(module, dm, rows), dm, rows)


def evaluate_predictions(pred: np.ndarray, dm: StoreDataModule, rows: np.ndarray) -> Evaluation:
    rec = dm.columns(rows)
    metrics = ranking_report(pred, rec["label"], rec["cost"], rec["task_id"], dm.network_weights())
    return Evaluation({k: float(v) for k, v in metrics.items()}, int(len(rows)),
                      int(len(np.unique(rec["task_id"]))), pred, rows)


def reference_metrics(dm: StoreDataModule, rows: np.ndarray, seed: int = 0) -> dict[str, dict]:
    """What ranking the same records costs nothing: the analytic draft score, which needs no training,
    and a random order. A learned model that does not beat the first on the user's data is not worth
    its training there (on unseen CPU operators none of ours does: README, Generalization).
    The random row is the mean of up to 20 seeded orders, fewer on large splits: one report of a
    million records takes ~7 s, and over thousands of tasks one order already is the mean."""
    rec = dm.columns(rows)
    draft = evaluate_predictions(rec["draft_score"].astype(np.float64), dm, rows)
    rng = np.random.default_rng(seed)
    orders = int(np.clip(100_000 // max(len(rows), 1), 1, 20))
    random = [evaluate_predictions(rng.random(len(rows)), dm, rows).metrics for _ in range(orders)]
    return {"analytic_draft": draft.to_json(),
            "random": {**{k: round(float(np.mean([o[k] for o in random])), 6) for k in random[0]},
                       "records": draft.records, "tasks": draft.tasks}}


def reference_on_split(store: Path, split: str, seed: int = 0) -> dict[str, dict]:
    """reference_metrics on the test records of ``split`` of ``store``."""
    dm = split_data(store, split, seed)
    return reference_metrics(dm, dm.test_rows, seed)


def below_the_draft(name: str, metrics: dict, reference: dict[str, dict]) -> str:
    """A note when model ``name`` ranks the records worse (peak@1) than the analytic draft score; else ''."""
    mine, draft = metrics.get("peak@1"), reference.get("analytic_draft", {}).get("peak@1")
    if mine is None or draft is None or mine >= draft:
        return ""
    return (f"note: {name} ranks these records below the analytic draft score, which needs no training "
            f"(peak@1 {mine:.3f} < {draft:.3f})")


def default_split(model_meta: dict, store: Path, store_meta: dict) -> str:
    """The model's own test split on the data it was trained on (the same source content, one of
    the datasets it was combined of, or the very store file); every record on any other data."""
    trained_on = {model_meta.get("data_fingerprint")}
    if str(model_meta.get("split", "")).startswith("within_task"):
        # one of the datasets of a combined training store splits as the combined store did: this
        # split picks records within each task, and a dataset's tasks are its own unless a
        # workload is in two of them (a by-task split of the whole would not be one of a part)
        trained_on |= {p.get("source_fingerprint") for p in model_meta.get("data_parts", [])}
    same = ((store_meta.get("source_fingerprint") in trained_on - {None})
            or ("store" in model_meta and Path(str(model_meta["store"])).resolve() == Path(store).resolve()))
    return str(model_meta["split"]) if same and model_meta.get("split") else "all"


def evaluate_model_file(model_file: Path, store: Path, split: Optional[str] = None,
                        seed: int = 0) -> tuple[Evaluation, StoreDataModule, str]:
    """(evaluation, data, the split used); ``split`` None picks ``default_split``."""
    from ..store.reader import FeatureStore

    store_meta = FeatureStore(store).meta
    module, model_meta = load_model(model_file, expect_schema=str(store_meta.get("feature_schema")))
    check_same_devices(model_file, model_meta, store, store_meta.get("devices", {}))
    held = store_meta.get("target_kinds") or ()
    trained = trained_on_other_kinds(model_meta, held) if held else []
    if trained:  # asked for in research, a slip otherwise: said, not refused
        warnings.warn(f"{model_file} was trained on {', '.join(trained)} programs and {store} holds "
                      f"{', '.join(sorted(held))} ones: a cross-target evaluation", stacklevel=2)
    split = split or default_split(model_meta, store, store_meta)
    dm = split_data(store, split, seed, with_steps=model_spec(module.hparams.get("model", "pacm")).reads_steps)
    return evaluate_module(module, dm), dm, split


def plot_evaluation(ev: Evaluation, dm: StoreDataModule, out_prefix: Path, title: str) -> list[Path]:
    """Predicted vs measured per task, and the peak score@k curve."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    rec = dm.columns(ev.rows)
    tasks = np.unique(rec["task_id"])
    shown = tasks[:16]
    cols = 4
    rows_n = int(np.ceil(len(shown) / cols)) or 1
    fig, axes = plt.subplots(rows_n, cols, figsize=(3.2 * cols, 2.8 * rows_n), squeeze=False)
    for ax in axes.flat[len(shown):]:
        ax.axis("off")
    for ax, t in zip(axes.flat, shown):
        sel = rec["task_id"] == t
        ax.scatter(ev.pred[sel], rec["label"][sel], s=10, alpha=0.7)
        key = dm.tables.task_keys[t].split("|")[0]  # '["<md5>", shapes...]' (TenSet) or 'ms:<hash>'
        ax.set_title((key[2:14] if key.startswith('["') else key[:16]) + "…", fontsize=8)
        ax.set_xlabel("predicted score", fontsize=7)
        ax.set_ylabel("measured y", fontsize=7)
        ax.tick_params(labelsize=6)
    fig.suptitle(f"{title}: predicted vs measured (test split, {len(tasks)} tasks)")
    fig.tight_layout()
    scatter = out_prefix.with_name(out_prefix.name + "_scatter.png")
    fig.savefig(scatter, dpi=110)
    plt.close(fig)

    ks = np.arange(1, 21)
    y = np.nan_to_num(rec["label"])
    task = rec["task_id"]
    curve = [peak_score(ev.pred, y, task, int(k)) for k in ks]
    rand = np.random.default_rng(0).random(len(ev.rows))
    base = [peak_score(rand, y, task, int(k)) for k in ks]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(ks, curve, marker="o", label=title)
    ax.plot(ks, base, linestyle="--", label="random order")
    ax.set_xlabel("k (programs measured)")
    ax.set_ylabel("peak score@k")
    ax.set_ylim(0, 1.02)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    curve_path = out_prefix.with_name(out_prefix.name + "_score_at_k.png")
    fig.savefig(curve_path, dpi=110)
    plt.close(fig)
    return [scatter, curve_path]
