"""pruner-train info: what a TenSet dataset or MetaSchedule database holds (no TVM needed)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import dumps
from ..progress import Progress
from ..tenset.dataset import DatasetSummary, discover, load_task_index, summarize


def _print_summary(s: DatasetSummary) -> None:
    out = sys.stdout.write
    out(f"dataset            {s.root}\n")
    out(f"tasks              {s.tasks}  ({', '.join(f'{k}: {v}' for k, v in s.tasks_by_target.items()) or '-'})\n")
    nets = sorted({n[0] for n in s.networks})
    out(f"networks           {len(nets)}  ({', '.join(nets) or 'no network_info'})\n")
    for name, shape, kind, count in s.networks:
        out(f"  {name:<16} {shape:<20} {kind:<6} {count} tasks\n")
    out(f"record files       {s.record_files}  ({s.small_tasks} with < 48 records)\n")
    out(f"records            {s.records}\n")
    for dev, n in sorted(s.devices.items()):
        out(f"  device {dev:<12} {n}\n")
    for target, n in sorted(s.targets.items()):
        out(f"  target {target}: {n}\n")
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(s.failures_by_reason.items()))
    out(f"failed records     {s.failed_records}{f'  ({reasons})' if reasons else ''}\n")
    if s.rejected_records:
        out(f"rejected records   {s.rejected_records}  (error_no 0 but no positive, finite time: not measured, "
            "featurize leaves them out)\n")
        for example in s.rejected_examples:
            out(f"  {example}\n")
    out(f"unknown-task recs  {s.unknown_task_records}\n")
    if s.mixed_task_records:
        out(f"mixed-task recs    {s.mixed_task_records}  (records whose task differs from their file's first)\n")
    out(f"unmeasured progs   {s.unmeasured_programs}\n")
    out(f"unreadable lines   {s.bad_lines}\n")
    for example in s.bad_line_examples:
        out(f"  {example}\n")
    for problem in s.task_problems:
        out(f"task file problem  {problem}\n")
    hist = sorted(((n, c) for c, n in s.step_histogram.items()), reverse=True)
    out("step codes         " + "  ".join(f"{c}:{n}" for n, c in hist) + "\n")


def _print_database(s) -> None:
    print(f"database           {s.root}  (MetaSchedule)")
    print(f"workloads          {s.workloads}  ({len(s.records_by_workload)} with records)")
    print(f"records            {s.records}")
    for kind, n in sorted(s.targets.items()):
        print(f"  target {kind}: {n}")
    print(f"failed records     {s.failed_records}")
    print(f"unreadable lines   {s.bad_lines}")
    for example in s.bad_line_examples:
        print(f"  {example}")


def run(args: argparse.Namespace) -> int:
    from ..sources import open_source
    from ..sources.metaschedule import MetaScheduleSource, summarize_database
    from ..sources.metaschedule_runs import MetaScheduleRunsSource

    source = open_source(args.dataset)
    if isinstance(source, MetaScheduleSource):
        summary = summarize_database(source.root)
        _print_database(summary)
    elif isinstance(source, MetaScheduleRunsSource):
        summaries = [summarize_database(db) for db in source.databases()]
        for s in summaries:
            _print_database(s)
        if args.json:
            print(dumps({"root": str(source.root), "source": source.kind,
                         "databases": [s.to_json() for s in summaries]}, sort_keys=True))
        return 0
    else:
        layout = discover(args.dataset)
        index = load_task_index(layout)
        n_files = len(layout.record_files()) + len(layout.unmeasured_files())
        with Progress("scanning", "file", n_files, args.quiet) as bar:
            summary = summarize(layout, index, on_file=lambda path, lines: bar.update(1))
        _print_summary(summary)
    if args.json:
        print(dumps(summary.to_json(), sort_keys=True))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("info", help="summarize a TenSet dataset or MetaSchedule databases (no TVM needed)")
    p.add_argument("dataset", type=Path, help="TenSet dataset directory (dataset_gpu/, ...), a MetaSchedule database "
                   "or a directory of them")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=run)

