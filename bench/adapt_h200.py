"""Online adaptation on real H200 measurements: MoA against fine-tuning, scratch and frozen.

    python bench/adapt_h200.py [--seeds 3] [--epochs 20] [--pretrain-epochs 30]

The 1821 programs of ../shared/h200-ms are featurized with the H200 constants. PaCM is
pretrained on 10 of its 16 workloads; the other 6 (a strided conv, an NHWC conv, a depthwise
conv, a BERT dense, a batch matmul, a fused conv+bias+relu) play the new tuning job: their
records arrive in tuning order, 10 per round, a retrain every 4 rounds, and the last 25% of
each new workload's records are held out and scored every 50 online records. Curves are
averaged over seeds (which change the retraining, not the data).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pruner_offline.adapt.config import METHODS, AdaptConfig
from pruner_offline.adapt.online import OnlineRecords, programs_of_store
from pruner_offline.adapt.simulate import held_out_rows, plot_curves, simulate, tuning_order
from pruner_offline.cli import ensure_store
from pruner_offline.store.reader import FeatureStore
from pruner_offline.store.writer import write_store
from pruner_offline.training.export import load_model
from pruner_offline.training.run import pretrain

REPO = Path(__file__).resolve().parents[1]
NEW_WORKLOADS = {3, 7, 9, 12, 14, 15}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=REPO.parent / "shared" / "h200-ms")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "adapt_h200")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=20, help="epochs per retrain")
    ap.add_argument("--pretrain-epochs", type=int, default=30)
    ap.add_argument("--momentum", type=float, default=0.99)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    store = ensure_store(args.db, REPO / "runs" / "features", jobs=2, quiet=True, devices={"cuda": {"name": "h200"}})
    full = FeatureStore(store)
    units = full.units()
    pre, new = args.out / "pretrain_workloads.h5", args.out / "new_workloads.h5"
    write_store(pre, [u for u in units if u[0] not in NEW_WORKLOADS], full.meta, {})
    write_store(new, [u for u in units if u[0] in NEW_WORKLOADS], full.meta, {})
    model = args.out / "pacm.pt"
    if not model.exists():
        r = pretrain(pre, "pacm", "within_task", args.out, max_epochs=args.pretrain_epochs, progress=False,
                     feature_schema=str(full.meta.get("feature_schema", "")))
        print("pretrained on 10 workloads, within-task test:", json.dumps(r.evaluation.to_json()))
    module, _ = load_model(model)

    d = FeatureStore(new).load()
    held = held_out_rows(d, 0.25)
    heldout = OnlineRecords(programs_of_store(d, np.flatnonzero(held))).data()
    order = tuning_order(d)
    stream = programs_of_store(d, order[~held[order]])
    runs = [simulate(module, METHODS, stream, heldout,
                     AdaptConfig(momentum=args.momentum, epochs=args.epochs, seed=s), eval_every=50)
            for s in range(args.seeds)]
    mean = {m: [{"online_records": p["online_records"],
                 **{k: float(np.mean([r[m][i][k] for r in runs])) for k in ("peak@1", "peak@5")}}
                for i, p in enumerate(runs[0][m])] for m in METHODS}
    print(f"{len(stream)} online records from {len(NEW_WORKLOADS)} new workloads, {len(heldout.records['label'])} "
          f"held out; momentum {args.momentum}, retrain every 4 rounds of 10, {args.epochs} epochs; "
          f"mean of {args.seeds} seeds")
    print(f"{'records':>8}  " + "  ".join(f"{m:>17}" for m in METHODS))
    for i, p in enumerate(mean["moa"]):
        print(f"{p['online_records']:>8}  " + "  ".join(
            f"{mean[m][i]['peak@1']:>8.3f}/{mean[m][i]['peak@5']:<8.3f}" for m in METHODS))
    for m in METHODS:
        later = [p for p in mean[m] if p["online_records"] >= 100]
        print(f"{m:>9}: mean held-out peak@1 {np.mean([p['peak@1'] for p in mean[m]]):.3f} over the run, "
              f"{np.mean([p['peak@1'] for p in later]):.3f} from 100 records on")
    plot_curves(mean, args.out / "adapt_h200.png", f"H200, 6 new workloads, mean of {args.seeds} seeds")
    (args.out / "curves.json").write_text(json.dumps(mean))
    print(f"plot: {args.out / 'adapt_h200.png'}")


if __name__ == "__main__":
    main()
