"""Online adaptation in both regimes, on real H200 measurements: does the default ever hurt?

    python bench/adapt.py [--seeds 3] [--folds 2] [--methods guarded moa finetune frozen] [--pretrain-epochs 30]

Leave-workloads-out folds over ../shared/h200-ms (16 workloads, 1821 programs, featurized with
the H200 constants). In each fold 6 workloads play the new tuning job (`--folds 3` adds a third
fold, to check a change beyond the two): their records arrive in
tuning order, 10 per round, a retrain every 4 rounds, and the last 25% of each new workload's
records are held out and scored every 50 online records.

- strong: PaCM pretrained on the other 10 workloads (it already ranks the new ones well);
- weak: PaCM pretrained on 3 of the others only;
- cross-target: the bundled CPU model (checkpoints/pacm.pt, llvm records of tenset-mini) adapted
  to the H200 records of each fold's new workloads: the closest thing to "a new device" this data
  allows (one pretrained model, so its seeds differ only in the retrains).

Seed s pretrains with seed s and retrains with seed s: pretraining on so few workloads is itself a
draw (one fold's held-out peak@1 of the pretrained model ranges 0.67-0.80 over pretraining runs), so
the frozen baseline is averaged over draws too, not only the adaptation.
Prints mean ± std over folds × seeds per point and each method's gap to frozen and to finetune;
writes runs/bench_adapt/adapt_<regime>.png and curves.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from pruner_offline.adapt.config import METHODS, AdaptConfig
from pruner_offline.adapt.online import OnlineRecords, programs_of_store
from pruner_offline.adapt.simulate import held_out_rows, simulate, tuning_order
from pruner_offline.build_store import FeaturizeSettings, cached_store
from pruner_offline.store.reader import FeatureStore
from pruner_offline.store.writer import write_store
from pruner_offline.training.export import load_model
from pruner_offline.training.run import pretrain

REPO = Path(__file__).resolve().parents[1]
FOLDS = ({3, 7, 9, 12, 14, 15}, {0, 2, 5, 8, 10, 13}, {1, 2, 4, 6, 7, 11})


def split_store(full: FeatureStore, keep: set[int], path: Path) -> Path:
    write_store(path, [u for u in full.units() if u[0] in keep], full.meta, {})
    return path


def run_fold(module, new_store: Path, methods, seed: int, evidence: float) -> dict:
    d = FeatureStore(new_store).load()
    held = held_out_rows(d, 0.25)
    heldout = OnlineRecords(programs_of_store(d, np.flatnonzero(held))).data()
    order = tuning_order(d)
    stream = programs_of_store(d, order[~held[order]])
    return simulate(module, methods, stream, heldout, AdaptConfig(seed=seed, evidence=evidence),
                    eval_every=50).curves


def summarize(runs: list[dict], methods) -> dict:
    """{method: [{"online_records", "mean", "std", "n"}]}, over folds x seeds, points in common."""
    out = {}
    for m in methods:
        n_points = min(len(r[m]) for r in runs)
        out[m] = [{"online_records": runs[0][m][i]["online_records"],
                   "mean": float(np.mean([r[m][i]["peak@1"] for r in runs])),
                   "std": float(np.std([r[m][i]["peak@1"] for r in runs])), "n": len(runs)}
                  for i in range(n_points)]
    return out


def report(name: str, summary: dict, out: Path) -> None:
    methods = list(summary)
    print(f"\n{name}: held-out peak@1, mean ± std over {summary[methods[0]][0]['n']} runs (folds x seeds)")
    print(f"{'records':>8}  " + "  ".join(f"{m:>15}" for m in methods))
    for i, p in enumerate(summary[methods[0]]):
        print(f"{p['online_records']:>8}  " + "  ".join(
            f"{summary[m][i]['mean']:>8.3f}±{summary[m][i]['std']:<6.3f}" for m in methods))
    for ref in ("frozen", "finetune"):
        if ref not in summary:
            continue
        for m in methods:
            if m == ref:
                continue
            gap = np.array([p["mean"] for p in summary[m]]) - [p["mean"] for p in summary[ref]]
            print(f"{m:>9} - {ref}: min {gap.min():+.3f}, last {gap[-1]:+.3f}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for m in methods:
        x = [p["online_records"] for p in summary[m]]
        mean = np.array([p["mean"] for p in summary[m]])
        std = np.array([p["std"] for p in summary[m]])
        ax.plot(x, mean, marker="o", ms=3, label=m)
        ax.fill_between(x, mean - std, mean + std, alpha=0.15)
    ax.set_xlabel("online records (measured on the new device)")
    ax.set_ylabel("held-out peak@1")
    ax.set_title(name)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    png = out / f"adapt_{name.split()[0]}.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    print(f"plot: {png}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=REPO.parent / "shared" / "h200-ms")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "bench_adapt")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--folds", type=int, default=2, choices=range(1, len(FOLDS) + 1))
    ap.add_argument("--methods", nargs="+", default=["frozen", "finetune", "moa", "guarded"], choices=METHODS)
    ap.add_argument("--pretrain-epochs", type=int, default=30)
    ap.add_argument("--regimes", nargs="+", default=["strong", "weak", "cross"])
    ap.add_argument("--evidence", type=float, default=AdaptConfig.evidence, help="guarded's margin, in standard errors")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # a shared machine; the retrains are small
    start = time.perf_counter()
    store, _ = cached_store(FeaturizeSettings(str(args.db), gpu="h200"), REPO / "runs" / "features", jobs=2)
    full = FeatureStore(store)
    workloads = {i for i, _ in full.units()}
    results: dict[str, dict] = {}
    per_run: dict[str, list[dict]] = {}  # every fold x seed's curves, so that later runs can be pooled
    for regime in args.regimes:
        runs: list[dict] = []
        for k, new in enumerate(FOLDS[:args.folds]):
            new_store = split_store(full, new, args.out / f"new_{k}.h5")
            rest = sorted(workloads - new)
            if regime != "cross":
                pre = split_store(full, set(rest if regime == "strong" else rest[:3]), args.out / f"{regime}_{k}.h5")
            for seed in range(args.seeds):
                if regime == "cross":
                    module, _ = load_model(REPO / "checkpoints" / "pacm.pt")
                else:
                    r = pretrain(pre, "pacm", "within_task", args.out / f"{regime}_{k}_{seed}", seed=seed,
                                 max_epochs=args.pretrain_epochs, progress=False,
                                 feature_schema=str(full.meta.get("feature_schema", "")))
                    module, _ = load_model(r.model_file)
                runs.append(run_fold(module, new_store, args.methods, seed, args.evidence))
            print(f"[{time.perf_counter() - start:.0f} s] {regime} fold {k} done", flush=True)
        results[regime] = summarize(runs, args.methods)
        per_run[regime] = runs
        report(f"{regime} ({'cross-target' if regime == 'cross' else 'pretrained on ' + ('10' if regime == 'strong' else '3') + ' workloads'})",
               results[regime], args.out)
    (args.out / "curves.json").write_text(json.dumps({**results, "runs": per_run}))
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
