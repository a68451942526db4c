"""What the 164 per-store columns are worth to PaCM on unseen data, and whose extractor should make them.

    python bench/per_store_ablation.py [--datasets cpu h200] [--seeds 5 3] [--arms zeroed schema3]
                                       [--out runs/per_store_ablation]

For each split of bench/generalize.py (cpu: holdout:NET over tenset-mini's llvm networks; h200:
leave-workloads-out folds over ../shared/h200-ms), PaCM is trained by `pretrain` (the shipped
recipe) with the same seed on the store of feature schema 2 (per-store columns by MetaSchedule's
PerStoreFeature: "full") and on each arm: "zeroed", a copy of it whose statement columns 0-163 are
0 (the op tag, PSA symbols, dataflow pattern and draft prior left); "schema3", the store of feature
schema 3 (the same columns by the package's own extractor). All are scored on the unseen split. Then each trained full model is scored again with one column group zeroed at a time, no
retraining: how much the model leans on that group (noisy: it moves by 0.1-0.3 between runs).
Prints the paired peak@1 difference (full - zeroed) with its standard error, and the mean change of
peak@1 per zeroed group. Results are kept in OUT/<dataset>.jsonl; a second run trains only what is
missing. The answer decides what an extractor of our own must compute (docs/features.md §7).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from pruner_offline.build_store import FeaturizeSettings, cached_store  # noqa: E402
from pruner_offline.features.schema import PER_STORE_COLUMNS, STATEMENT_COLUMNS  # noqa: E402
from pruner_offline.store.reader import FeatureStore  # noqa: E402
from pruner_offline.training.evaluate import evaluate_module, split_data  # noqa: E402
from pruner_offline.training.export import load_model  # noqa: E402
from pruner_offline.training.run import pretrain  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generalize import splits  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _span(first: str, last: str) -> range:
    return range(STATEMENT_COLUMNS.index(first), STATEMENT_COLUMNS.index(last) + 1)


GROUPS = {
    "op counts": _span("float_mad", "select_op"),
    "vectorize/unroll/parallel": _span("vec_num", "parallel_pos_mixed"),
    "gpu threads": _span("is_gpu", "vthread_len"),
    "written buffer (buf0)": _span("buf0_acc_read", "buf0_stride"),
    "other buffers (buf1-4)": _span("buf1_acc_read", "buf4_stride"),
    "arithmetic intensity": _span("arith_intensity_0", "arith_intensity_9"),
    "allocation": _span("alloc_size", "alloc_inner_prod"),
    "loop nest (outer_prod, num_loops, unroll step)": _span("outer_prod", "auto_unroll_max_step"),
    "all per-store columns": range(len(PER_STORE_COLUMNS)),
}


def zeroed_store(store: Path, out: Path) -> Path:
    if not out.exists():
        tmp = out.with_suffix(".tmp")
        shutil.copy(store, tmp)
        with h5py.File(tmp, "r+") as h:
            statements = h["statements"][...]
            statements[:, :len(PER_STORE_COLUMNS)] = 0
            h["statements"][...] = statements
        tmp.rename(out)
    return out


def reliance(model_file: Path, store: Path, split: str, seed: int) -> dict[str, float]:
    """peak@1 of the trained model, and its change with each group's columns zeroed."""
    module, _ = load_model(model_file)
    dm = split_data(store, split, seed)
    gather = dm.gather
    base = evaluate_module(module.eval(), dm).metrics["peak@1"]
    out = {"base": base}
    for name, cols in GROUPS.items():
        index = torch.as_tensor(list(cols))

        def without(rows, index=index):
            batch = gather(rows)
            batch.statements[:, index] = 0
            return batch

        dm.gather = without
        out[name] = evaluate_module(module, dm).metrics["peak@1"] - base
    dm.gather = gather
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["cpu", "h200"], choices=["cpu", "h200"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[5, 3], help="seeds per dataset, in --datasets order")
    ap.add_argument("--arms", nargs="+", default=["zeroed"], choices=["zeroed", "schema3"],
                    help="what to compare with the schema-2 store")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "per_store_ablation")
    args = ap.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    for dataset, seeds in zip(args.datasets, args.seeds + args.seeds[-1:] * len(args.datasets)):
        settings = FeaturizeSettings(str(REPO.parent / "shared" / "h200-ms"), gpu="h200") if dataset == "h200" \
            else FeaturizeSettings(str(REPO.parent / "shared" / "tenset-mini"))
        store, _ = cached_store(replace(settings, feature_schema=2), REPO / "runs" / "features", jobs=2)
        arms = {"full": store}
        if "zeroed" in args.arms:
            arms["zeroed"] = zeroed_store(store, args.out / f"{dataset}-per-store-zeroed.h5")
        if "schema3" in args.arms:
            arms["schema3"] = cached_store(replace(settings, feature_schema=3), REPO / "runs" / "features", jobs=2)[0]
        results = args.out / f"{dataset}.jsonl"
        rows = {r["key"]: r for r in map(json.loads, results.read_text().splitlines())} if results.exists() else {}
        pairs, leaning = [], []
        for split, seed in splits(dataset, store, 4, seeds):
            got = {}
            for arm, path in arms.items():
                key = f"{arm}|{split}|{seed}"
                if key not in rows:
                    run = args.out / dataset / arm / f"{split.replace(':', '_').replace('/', '-')}-{seed}"
                    schema = str(FeatureStore(path).meta.get("feature_schema", ""))
                    r = pretrain(path, "pacm", split, run, seed=seed, progress=False, quiet=True, feature_schema=schema)
                    row = {"key": key, **{k: r.evaluation.metrics[k] for k in ("peak@1", "peak@5")},
                           "model": str(r.model_file)}
                    if arm == "full":
                        row["reliance"] = reliance(r.model_file, store, split, seed)
                    rows[key] = row
                    with results.open("a") as f:
                        f.write(json.dumps(row) + "\n")
                got[arm] = rows[key]
            pairs.append(got)
            print(f"{dataset} {split} seed {seed}: peak@1 " + ", ".join(f"{a} {got[a]['peak@1']:.3f}" for a in arms),
                  flush=True)
            leaning.append(got["full"]["reliance"])
        full = np.array([[g["full"]["peak@1"], g["full"]["peak@5"]] for g in pairs])
        print(f"\n{dataset}: {len(full)} runs, peak@1 (peak@5) full {full[:, 0].mean():.3f} ± {full[:, 0].std():.3f} "
              f"({full[:, 1].mean():.3f})")
        for arm in list(arms)[1:]:
            p = np.array([[g[arm]["peak@1"], g[arm]["peak@5"]] for g in pairs])
            diff = full[:, 0] - p[:, 0]
            print(f"  {arm}: {p[:, 0].mean():.3f} ± {p[:, 0].std():.3f} ({p[:, 1].mean():.3f}); paired difference "
                  f"full - {arm} {diff.mean():+.3f} ± {diff.std(ddof=1) / np.sqrt(len(diff)):.3f} (s.e.), "
                  f"full better in {int((diff > 0).sum())}/{len(diff)}")
        print("mean change of the full models' peak@1 with one group zeroed (no retraining):")
        for name in GROUPS:
            print(f"  {name:<48} {np.mean([r[name] for r in leaning]):+.3f}")


if __name__ == "__main__":
    main()
