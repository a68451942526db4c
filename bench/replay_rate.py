"""Replay every record of a TenSet-format dataset; print success rate per target, failure
reasons and records/s.  Usage: python bench/replay_rate.py [DATASET_DIR] [--limit N]"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from pruner_offline.replay import replay_record
from pruner_offline.tenset.records import BadLine, read_records
from pruner_offline.tenset.tasks import load_all_tasks

DEFAULT = Path(__file__).resolve().parents[1] / "datasets" / "tenset-mini"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", nargs="?", default=str(DEFAULT))
    ap.add_argument("--limit", type=int, default=0, help="records per file (0: all)")
    ap.add_argument("--show", type=int, default=0, help="print this many failures per reason")
    args = ap.parse_args()
    root = Path(args.dataset)
    tasks = {t.key: t for t in load_all_tasks(root / "network_info" / "all_tasks.pkl")}
    files = sorted(root.glob("measure_records/*/*.json")) + sorted(root.glob("to_measure_programs/*.json"))
    total = collections.Counter()
    ok = collections.Counter()
    reasons: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    shown = collections.Counter()
    start = time.perf_counter()
    for path in files:
        for n, rec in enumerate(read_records(path)):
            if args.limit and n >= args.limit:
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
            else:
                reasons[kind][res.reason] += 1
                if shown[res.reason] < args.show:
                    shown[res.reason] += 1
                    print(f"{rec.source}: {res.reason}: {res.detail}")
    seconds = time.perf_counter() - start
    n = sum(total.values())
    summary = {
        kind: {"records": total[kind], "replayed": ok[kind], "rate": round(ok[kind] / total[kind], 4),
               "failure_reasons": dict(reasons[kind].most_common())}
        for kind in sorted(total)
    }
    summary["seconds"] = round(seconds, 1)
    summary["records_per_second"] = round(n / seconds, 1) if seconds else None
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
