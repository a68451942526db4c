"""How well the CPU variant of the analytic draft score ranks real measured llvm programs: the
tenset-mini records (Ansor programs replayed as TIR, measured on 2 vCPUs of an AMD EPYC Zen 3).

Prints one JSON line: per-task Spearman correlation of draft score with measured mean cost (a good
score is strongly negative), their mean, and the pooled figure.

    python bench/draft_score_cpu.py [--root ../shared/tenset-mini]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from draft_score_h200 import spearman

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "shared" / "tenset-mini"


def main() -> None:
    from pruner_offline.features import DeviceConstants
    from pruner_offline.features.extract import featurize_prim_func
    from pruner_offline.replay import replay_record
    from pruner_offline.tenset.records import Record, read_records
    from pruner_offline.tenset.tasks import load_all_tasks

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args()
    # The measuring machine (tenset-mini README): 2 Zen 3 vCPUs, AVX2 + 2 FMA units at ~3 GHz,
    # 512 KB L2 per core, a share of the socket's bandwidth.
    device = DeviceConstants("epyc-zen3-2vcpu", False, 2 * 3.0 * 2 * 2 * 8, 20, 2, 32, 512 * 1024)
    tasks = {t.key: t for t in load_all_tasks(args.root / "network_info" / "all_tasks.pkl")}
    per_task, pooled_scores, pooled_costs = {}, [], []
    for path in sorted(args.root.glob("measure_records/*/*.json")):
        scores, costs = [], []
        for rec in read_records(path):
            if not isinstance(rec, Record) or not rec.ok:
                continue
            replayed = replay_record(tasks[(rec.workload_key.text, rec.target_kind)], rec)
            if replayed.ok:
                scores.append(featurize_prim_func(replayed.mod["main"], "llvm", device).draft_score)
                costs.append(float(np.mean(rec.costs)))
        if len(scores) >= 5:
            per_task[path.name[:60]] = spearman(np.array(scores), np.array(costs))
            pooled_scores += scores
            pooled_costs += costs
    print(json.dumps({
        "records": len(pooled_scores),
        "mean_per_task_spearman": round(float(np.mean(list(per_task.values()))), 4),
        "pooled_spearman": round(spearman(np.array(pooled_scores), np.array(pooled_costs)), 4),
        "per_task_spearman": {k: round(v, 3) for k, v in per_task.items()},
    }))


if __name__ == "__main__":
    main()
