"""Replay every record of TenSet-format datasets; print the success rate per target, failure
reasons and records/s. With --features N, also time the per-store features of the first N
replayed programs per target: as stored and in the Ansor view, whose cost is
reported as a ratio to the stored features measured in the same run.

    python bench/replay_rate.py [DATASET_DIR ...] [--limit N] [--show N] [--features N]
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from pruner_offline.features.per_store import per_store_features
from pruner_offline.replay import replay_record
from pruner_offline.tenset.records import BadLine, read_records
from pruner_offline.tenset.tasks import load_all_tasks

DATASETS = Path(__file__).resolve().parents[1] / "datasets"
DEFAULT = [DATASETS / "tenset-mini", DATASETS / "ansor-public-logs", DATASETS / "ansor-public-history",
           DATASETS / "ansor-sampled"]


def _seconds(fn, items) -> float:
    start = time.perf_counter()
    for item in items:
        fn(item)
    return time.perf_counter() - start


def replay_dataset(root: Path, limit: int, show: int, features: int) -> dict:
    tasks = {t.key: t for t in load_all_tasks(root / "network_info" / "all_tasks.pkl")}
    files = sorted(root.glob("measure_records/*/*.json")) + sorted(root.glob("to_measure_programs/*.json"))
    total = collections.Counter()
    ok = collections.Counter()
    reasons: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    shown = collections.Counter()
    programs: dict[str, list] = collections.defaultdict(list)
    start = time.perf_counter()
    for path in files:
        for n, rec in enumerate(read_records(path)):
            if limit and n >= limit:
                break
            if isinstance(rec, BadLine):
                reasons["?"]["unreadable line"] += 1
                continue
            kind = rec.target_kind
            total[kind] += 1
            task = tasks.get((rec.workload_key.text, kind))
            if task is None:
                reasons[kind]["no task"] += 1
                continue
            res = replay_record(task, rec)
            if res.ok:
                ok[kind] += 1
                if features and len(programs[kind]) < features:
                    programs[kind].append(res.mod["main"])
            else:
                reasons[kind][res.reason] += 1
                if shown[res.reason] < show:
                    shown[res.reason] += 1
                    print(f"{rec.source}: {res.reason}: {res.detail}")
    seconds = time.perf_counter() - start
    n = sum(total.values())
    summary: dict = {
        kind: {"records": total[kind], "replayed": ok[kind], "rate": round(ok[kind] / total[kind], 4),
               "failure_reasons": dict(reasons[kind].most_common())}
        for kind in sorted(total)
    }
    summary["seconds"] = round(seconds, 1)
    summary["records_per_second"] = round(n / seconds, 1) if seconds else None
    for kind, funcs in sorted(programs.items()):
        stored = _seconds(lambda f: per_store_features(f, kind), funcs)
        view = _seconds(lambda f: per_store_features(f, kind, ansor=True), funcs)
        summary[kind]["features"] = {"programs": len(funcs), "stored_ms": round(1e3 * stored / len(funcs), 2),
                                     "ansor_view_ms": round(1e3 * view / len(funcs), 2),
                                     "ansor_view_over_stored": round(view / stored, 2)}
    return summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("datasets", nargs="*", default=[str(d) for d in DEFAULT])
    ap.add_argument("--limit", type=int, default=0, help="records per file (0: all)")
    ap.add_argument("--show", type=int, default=0, help="print this many failures per reason")
    ap.add_argument("--features", type=int, default=0, help="time the features of this many programs per target")
    args = ap.parse_args()
    print(json.dumps({d: replay_dataset(Path(d), args.limit, args.show, args.features) for d in args.datasets},
                     indent=1))


if __name__ == "__main__":
    main()
