"""Ranking programs of workloads and networks no training record came from: PaCM against the
TenSet-MLP, GBDT, the learned draft model, the analytic draft score and a random order.

    python bench/generalize.py [--seeds 3] [--folds 4] [--variants recipe ...] [--datasets h200 cpu]
    python bench/generalize.py --datasets collect --folds 5 --baselines mlp gbdt --train-sizes 1000 3000 10000

- h200: ../shared/h200-ms (16 workloads, H200 constants) in leave-workloads-out folds
  (split ``fold:I/K:SEED``: the seed also reshuffles which workloads share a fold, so seeds x folds
  test on seeds x K different workload sets); every labelled record of the unseen workloads scored.
- cpu: tenset-mini llvm, split ``holdout:NET`` for each of its networks (all tasks of NET unseen).
- ops: trained on tenset-mini llvm (TenSet's within-task split), scored on every measured program
  of datasets/ansor-sampled: 11 operators no tenset-mini network has, measured on the same CPU
  (bench/ansor_measure.py).
- collect: datasets/cpu-collect (MetaSchedule programs that `pruner-train collect` measured on
  this CPU for 20+ networks) in leave-networks-out folds: split ``holdout:NET,...`` with the
  networks dealt into --folds groups by each seed (a task two networks share is unseen when
  either is held out); every labelled record of the held-out networks scored.
- collect-to-tenset / tenset-to-collect: trained on one of the two CPU datasets (within-task
  split), scored on every measured program of the other: the same CPU, another program generator
  (MetaSchedule traces against Ansor's sketches).

Models train through ``pretrain`` (the LightningCLI recipe in training/), once per split x seed.
A variant is a recipe overlay (``VARIANTS``, dotted LightningCLI keys) over the default recipe:
``recipe`` is the recipe as shipped. Results are kept in OUT/results.jsonl keyed by dataset, model,
a digest of the merged training configuration, split and seed, so a second run only trains what is
new, and a variant the shipped recipe has become is not trained again (``--fresh`` retrains all;
the key does not see code changes). Prints peak@1 / peak@5, mean ± std over folds x seeds, and each
model's paired peak@1 lead over each TenSet-MLP row. ``--scales A B ...`` also scores every trained
PaCM with its learned correction at each scale (rows ``PaCM [variant] xA``: the same weights).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Optional

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

from pruner_offline.build_store import FeaturizeSettings, cached_store  # noqa: E402
from pruner_offline.store.reader import FeatureStore  # noqa: E402
from pruner_offline.training.compare import train_gbdt  # noqa: E402
from pruner_offline.training.evaluate import (evaluate_model_file, evaluate_module, reference_on_split,  # noqa: E402
                                              split_data)
from pruner_offline.training.export import load_model  # noqa: E402
from pruner_offline.training.run import pretrain, recipe_configs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _choose_by(monitor: str, mode: str) -> list[dict]:
    """The recipe's checkpoint choice and early stopping, on another validation score."""
    return [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
             "init_args": {"monitor": monitor, "mode": mode, "save_last": True, "save_top_k": 1, "filename": "best"}},
            {"class_path": "lightning.pytorch.callbacks.EarlyStopping",
             "init_args": {"monitor": monitor, "mode": mode, "patience": 16}}]


# The recipe candidates measured (docs/models-and-training.md §6 says which one ships and why).
# "prev" is the recipe before 2026-12-01 (bb34e47): one LambdaRank list per batch, validation a
# sample of the training tasks' records, PaCM without the draft prior; "task_prior" spells out the
# recipe of bb34e47.
# Those before "sel_loss" kept the checkpoint with the best val peak@1, as the recipe did until the
# checkpoint was chosen by the validation loss on whole training tasks ("taskval_loss", shipped now).
_PEAK1 = {"trainer.callbacks": _choose_by("val_peak@1", "max")}
_LOSS = {"trainer.callbacks": _choose_by("val_loss", "min")}
VARIANTS: dict[str, dict[str, object]] = {
    "recipe": {},
    "prev": {"model.loss": "lambdarank", "data.val_by_task": False, "model.draft_prior": False, **_PEAK1},
    "task_loss": {"model.loss": "lambdarank_task", "data.val_by_task": False, "model.draft_prior": False, **_PEAK1},
    "task_val": {"model.loss": "lambdarank_task", "data.val_by_task": True, "model.draft_prior": False, **_PEAK1},
    "recipe_taskval": {"model.loss": "lambdarank_task", "data.val_by_task": True, "model.draft_prior": True,
                       **_PEAK1},
    "task_prior": {"model.loss": "lambdarank_task", "data.val_by_task": False, "model.draft_prior": True, **_PEAK1},
    "list_prior": {"model.loss": "lambdarank", "data.val_by_task": False, "model.draft_prior": True, **_PEAK1},
    "prior_wd4": {"model.loss": "lambdarank_task", "data.val_by_task": False, "model.draft_prior": True,
                  "model.weight_decay": 1e-4, **_PEAK1},
    "prior_wd3": {"model.loss": "lambdarank_task", "data.val_by_task": False, "model.draft_prior": True,
                  "model.weight_decay": 1e-3, **_PEAK1},
    "pair_task": {"model.loss": "pairwise_task", "data.val_by_task": False, "model.draft_prior": False, **_PEAK1},
    "pair_prior": {"model.loss": "pairwise_task", "data.val_by_task": False, "model.draft_prior": True, **_PEAK1},
    "sel_loss": {"data.val_by_task": False, **_LOSS},
    "fixed30": {"data.val_by_task": False, "trainer.max_epochs": 30, "trainer.callbacks": [
        {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint", "init_args": {"save_last": True}}]},
    "taskval_loss": {"model.loss": "lambdarank_task", "data.val_by_task": True, "model.draft_prior": True, **_LOSS},
    "taskval2_loss": {"model.loss": "lambdarank_task", "data.val_by_task": True, "model.draft_prior": True,
                      "data.val_fraction": 0.2, **_LOSS},
    "correction1": {"model.correction_scale": 1.0},  # the recipe until PaCM scored with a quarter of it
    "recipe_wd4": {"model.weight_decay": 1e-4},
    "recipe_wd3": {"model.weight_decay": 1e-3},
    "wide2": {"model.width": 2.0},
    "task_batches": {"data.task_batches": True},
    "task_batches_long": {"data.task_batches": True, "trainer.max_epochs": 120},
}


NAMES = {"pacm": "PaCM", "mlp": "TenSet-MLP", "draft": "learned draft", "gbdt": "GBDT"}


def overlay(values: dict[str, object]) -> dict:
    out: dict = {}
    for key, value in values.items():
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def merged(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def overlay_file(model: str, name: str, out: Path, train_records: Optional[int] = None) -> tuple[list[Path], str]:
    """(extra config files, a digest of the training configuration they make) for ``model`` trained
    with variant ``name`` (on a sample of ``train_records`` training records): the digest is of the
    recipe files merged with the overlay, so a variant that the shipped recipe has become is
    recognised as already measured."""
    values = {**VARIANTS[name], **({"data.max_train_records": train_records} if train_records else {})}
    config: dict = {}
    for path in recipe_configs(model):
        config = merged(config, yaml.safe_load(path.read_text()))
    digest = hashlib.sha256(json.dumps(merged(config, overlay(values)), sort_keys=True).encode()).hexdigest()[:10]
    if not values:
        return [], digest
    path = out / "overlays" / f"{name}-{digest}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(overlay(values)))  # JSON is YAML
    return [path], digest


# dataset -> (the data trained on, the data scored when it is another)
TRAINED_SCORED = {"h200": ("h200", None), "cpu": ("cpu", None), "ops": ("cpu", "ops"), "collect": ("collect", None),
                  "collect-to-tenset": ("collect", "cpu"), "tenset-to-collect": ("cpu", "collect")}


def splits(dataset: str, store: Path, folds: int, seeds: int) -> list[tuple[str, int]]:
    if TRAINED_SCORED[dataset][1] is not None:
        return [("within_task", s) for s in range(seeds)]
    if dataset == "h200":
        return [(f"fold:{i}/{folds}:{s}", s) for s in range(seeds) for i in range(folds)]
    nets = sorted(set().union(*(set(n) for n in FeatureStore(store).index().task_networks)))
    if dataset == "collect":
        out = []
        for s in range(seeds):
            dealt = [str(n) for n in np.random.default_rng(s).permutation(nets)]
            out += [("holdout:" + ",".join(sorted(dealt[i::folds])), s) for i in range(folds)]
        return out
    return [(f"holdout:{net}", s) for s in range(seeds) for net in nets]


class Results:
    def __init__(self, path: Path, fresh: bool):
        self.path = path
        self.rows: dict[str, dict] = {}
        if path.is_file() and not fresh:
            for line in path.read_text().splitlines():
                row = json.loads(line)
                self.rows[row["key"]] = row

    def get(self, key: str):
        return self.rows.get(key)

    def add(self, key: str, metrics: dict) -> dict:
        row = {"key": key, **metrics}
        self.rows[key] = row
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        return row


def rescored(model_file: Path, store: Path, split: str, seed: int, scale: float) -> dict:
    """The test metrics of the PaCM in ``model_file`` scoring with its correction at ``scale``."""
    module, _ = load_model(model_file)
    module.correction_scale.fill_(scale)
    return evaluate_module(module, split_data(store, split, seed)).metrics


def untrained_scores(store: Path, split: str, seed: int) -> dict[str, dict]:
    """The analytic draft score and a random order (see reference_metrics) on the test records of ``split``."""
    reference = reference_on_split(store, split, seed)
    return {"analytic draft": reference["analytic_draft"], "random": reference["random"]}


# cpu-collect was measured on the two cores of this 2-vCPU EPYC (collect.json: num_cores 2): its
# draft score counts two cores, not the 7452's 32 that tenset-mini's is made with
CPU_CONSTANTS = {"collect": "epyc-2vcpu"}


def featurized(data: str, args, constants_of: Optional[str] = None) -> Path:
    """The store of one of the datasets, featurized once and cached by content, with the CPU
    constants of dataset ``constants_of`` (default its own): a model scores programs featurized
    with the constants it was trained with."""
    settings = (FeaturizeSettings(str(args.h200), gpu="h200") if data == "h200" else
                FeaturizeSettings(str(getattr(args, data)), cpu=CPU_CONSTANTS.get(constants_of or data)))
    return cached_store(settings, REPO / "runs" / "features", jobs=2)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--h200", type=Path, default=REPO.parent / "shared" / "h200-ms")
    ap.add_argument("--cpu", type=Path, default=REPO.parent / "shared" / "tenset-mini")
    ap.add_argument("--ops", type=Path, default=REPO / "datasets" / "ansor-sampled")
    ap.add_argument("--collect", type=Path, default=REPO / "datasets" / "cpu-collect" / "collection")
    ap.add_argument("--datasets", nargs="+", default=["h200", "cpu"], choices=list(TRAINED_SCORED))
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "bench_generalize")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--folds", type=int, default=4)
    ap.add_argument("--variants", nargs="+", default=["recipe"], choices=list(VARIANTS),
                    help="PaCM recipes to measure (the baselines train with the recipe as shipped)")
    ap.add_argument("--baselines", nargs="*", default=["mlp", "draft"], choices=["mlp", "draft", "gbdt"])
    ap.add_argument("--baseline-variants", nargs="+", default=["recipe"], choices=list(VARIANTS),
                    help="recipes the baselines train with")
    ap.add_argument("--scales", nargs="*", type=float, default=[],
                    help="also score each trained PaCM at these correction scales (the same weights, post hoc)")
    ap.add_argument("--max-epochs", type=int, default=None)
    ap.add_argument("--train-sizes", nargs="*", type=int, default=[],
                    help="a learning curve: also train every model on a seeded sample of this many training "
                         "records (rows 'MODEL [variant] nN'); OUT/learning_curve.png")
    ap.add_argument("--fresh", action="store_true", help="retrain everything instead of reusing OUT/results.jsonl")
    args = ap.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    results = Results(args.out / "results.jsonl", args.fresh)
    start = time.perf_counter()
    table: dict[str, dict[str, list[dict]]] = {}
    for dataset in args.datasets:
        trained, scored_on = TRAINED_SCORED[dataset]
        store = featurized(trained, args)
        scored = featurized(scored_on, args, constants_of=trained) if scored_on else None
        schema = str(FeatureStore(store).meta.get("feature_schema", ""))
        runs = [("pacm", v, n) for v in args.variants for n in [None, *args.train_sizes]] + \
            [(b, v, n) for b in args.baselines for v in args.baseline_variants
             for n in [None, *(args.train_sizes if b != "gbdt" else [])]]  # the trees take every record
        scores = table.setdefault(dataset, {})
        for split, seed in splits(dataset, store, args.folds, args.seeds):
            for name, metrics in (untrained_scores(scored, "all", seed) if scored else
                                  untrained_scores(store, split, seed)).items():
                scores.setdefault(name, []).append(metrics)
            for model, variant, size in runs:
                configs, digest = overlay_file(model, variant, args.out, size)
                key = f"{dataset}|{model}|{digest}|{split}|{seed}|{args.max_epochs}"
                row = results.get(key)
                run_dir = args.out / dataset / f"{model}-{digest}" / f"{split.replace(':', '_').replace('/', '-')}-{seed}"
                if row is None:
                    r = (train_gbdt(store, split, seed, run_dir) if model == "gbdt" else
                         pretrain(store, model, split, run_dir, max_epochs=args.max_epochs, seed=seed,
                                  extra_configs=configs, progress=False, feature_schema=schema))
                    metrics = evaluate_model_file(r.model_file, scored, "all")[0].metrics if scored else r.evaluation.metrics
                    meta = run_dir / f"{model}.json"
                    trained_on = json.loads(meta.read_text())["train_records"] if meta.is_file() else None
                    row = results.add(key, {**metrics, "epochs": r.epochs, "train_records": trained_on})
                    print(f"[{time.perf_counter() - start:.0f} s] {dataset} {model} {variant} {split} seed {seed}: "
                          f"peak@1 {row['peak@1']:.3f} peak@5 {row['peak@5']:.3f} ({row['epochs']} epochs)", flush=True)
                label = f"{NAMES[model]} [{variant}]" + (f" n{size}" if size else "")
                scores.setdefault(label, []).append(row)
                for scale in args.scales if model == "pacm" else ():
                    at = results.get(f"{key}|scale {scale}") or results.add(
                        f"{key}|scale {scale}", rescored(run_dir / f"{model}.pt", scored or store,
                                                         "all" if scored else split, seed, scale))
                    scores.setdefault(f"{label} x{scale:g}", []).append(at)
    report(table)
    if args.train_sizes:
        learning_curve(table, args.out / "learning_curve.png")
    (args.out / "summary.json").write_text(json.dumps(
        {d: {m: {k: [r[k] for r in rows] for k in ("peak@1", "peak@5")} for m, rows in t.items()}
         for d, t in table.items()}))
    print(f"total {time.perf_counter() - start:.0f} s")


def learning_curve(table: dict[str, dict[str, list[dict]]], png: Path) -> None:
    """Mean peak@1 over splits x seeds against the training records, per dataset and model, as a
    table and a PNG (the full training set at its mean size is the last point)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(table), figsize=(5 * len(table), 4), squeeze=False)
    for ax, (dataset, scores) in zip(axes[0], table.items()):
        curves: dict[str, list[tuple[float, float, float]]] = {}
        for name, rows in scores.items():
            base, _, size = name.partition(" n")
            if not base.endswith("]"):
                continue  # the untrained rows
            counts = [r["train_records"] for r in rows if r.get("train_records")]
            if not size and not counts:
                continue  # trained on every record, counted nowhere (the trees)
            n = float(size) if size else float(np.mean(counts))
            p1 = np.array([r["peak@1"] for r in rows])
            curves.setdefault(base, []).append((n, p1.mean(), p1.std()))
        print(f"\nlearning curve, {dataset}: mean peak@1 ± std by training records")
        for base, points in curves.items():
            points.sort()
            print(f"  {base:<28}" + "  ".join(f"{n:>7.0f}: {m:.3f}±{s:.3f}" for n, m, s in points))
            ax.errorbar([p[0] for p in points], [p[1] for p in points], yerr=[p[2] for p in points], marker="o",
                        capsize=3, label=base)
        ax.set_xscale("log")
        ax.set_xlabel("training records")
        ax.set_ylabel("peak@1 on held-out data")
        ax.set_title(dataset)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    print(f"plot: {png}")


def report(table: dict[str, dict[str, list[dict]]]) -> None:
    """Per dataset, each model's mean ± std, and its mean peak@1 lead over each TenSet-MLP row (the
    same splits and seeds, paired)."""
    for dataset, scores in table.items():
        n = len(next(iter(scores.values())))
        what = {"h200": "unseen H200 workloads (leave-workloads-out folds)",
                "cpu": "unseen CPU networks (holdout:NET, tenset-mini llvm)",
                "ops": "unseen CPU operators (trained on tenset-mini llvm, scored on ansor-sampled)",
                "collect": "unseen CPU networks (leave-networks-out folds, cpu-collect)",
                "collect-to-tenset": "trained on cpu-collect, scored on tenset-mini llvm (Ansor's programs)",
                "tenset-to-collect": "trained on tenset-mini llvm, scored on cpu-collect (MetaSchedule's)"}[dataset]
        mlps = {name: np.array([r["peak@1"] for r in rows]) for name, rows in scores.items()
                if name.startswith(NAMES["mlp"])}
        print(f"\n{what}: mean ± std over {n} runs (splits x seeds)")
        print(f"{'model':<28} {'peak@1':>14} {'peak@5':>14} {'pairwise':>9} {'NDCG@10':>8}"
              + "".join(f" {'vs ' + m.split()[-1] + ' MLP':>14}" for m in mlps))
        for name, rows in scores.items():
            p1, p5 = (np.array([r[k] for r in rows]) for k in ("peak@1", "peak@5"))
            pw, nd = (np.mean([r[k] for r in rows]) for k in ("pairwise_acc", "ndcg@10"))
            leads = "".join(f" {np.mean(p1 - m):>+14.3f}" if len(m) == len(p1) and name != mname else f" {'':>14}"
                            for mname, m in mlps.items())
            print(f"{name:<28} {p1.mean():>7.3f}±{p1.std():<6.3f} {p5.mean():>7.3f}±{p5.std():<6.3f} {pw:>9.3f} {nd:>8.3f}{leads}")


if __name__ == "__main__":
    main()
