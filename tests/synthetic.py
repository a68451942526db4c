import numpy as np
from pathlib import Path
from pruner_offline.store.schema import UnitFeatures
from pruner_offline.store.writer import write_store

def synthetic_store(path: Path, n_tasks=6, per_task=60, seed=0, schema="synthetic-1"):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=174)
    units = []
    for t in range(n_tasks):
        n = per_task
        counts = rng.integers(1, 4, n).astype(np.int32)
        s = int(counts.sum())
        stm = rng.random((s, 174)).astype(np.float32)
        seg = np.repeat(np.arange(n), counts)
        score = np.zeros(n); np.add.at(score, seg, stm @ w)
        cost = np.exp(score / 4)
        label = (cost.min() / cost).astype(np.float32)
        sym = np.abs(rng.normal(size=(s, 11))).astype(np.float32) * 1e4
        flow = rng.random((n, 8, 23)).astype(np.float32)
        arrays = {"line": np.arange(1, n + 1, dtype=np.int32), "position": np.arange(n, dtype=np.int32),
                  "label": label, "cost": cost, "error_no": np.zeros(n, np.int32), "stmt_count": counts,
                  "draft_score": (1 / cost).astype(np.float32), "statements": stm, "symbols": sym,
                  "dataflow": flow, "steps": rng.random((n, 64, 37)).astype(np.float32)}
        units.append((t, UnitFeatures(f"t{t}.json", "dev", f'["k{t}"]', "llvm", arrays, [], n)))
    write_store(path, units, {"feature_schema": schema}, {f'["k{t}"]|llvm': {"net": 1} for t in range(n_tasks)})
    return path
