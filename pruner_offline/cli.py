"""``pruner-train``: wires the stages together; each stage lives in its own package."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from tqdm import tqdm

from .store.schema import StoreError
from .tenset.dataset import DatasetError, DatasetSummary, discover, load_task_index, summarize


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


def cmd_info(args: argparse.Namespace) -> int:
    layout = discover(args.dataset)
    index = load_task_index(layout)
    n_files = len(layout.record_files()) + len(layout.unmeasured_files())
    with tqdm(total=n_files, unit="file", desc="scanning", file=sys.stderr, disable=args.quiet) as bar:
        def progress(path: Path, lines: int) -> None:
            bar.update(1)
            bar.set_postfix(lines=lines, refresh=False)

        summary = summarize(layout, index, on_file=progress)
    _print_summary(summary)
    if args.json:
        print(json.dumps(summary.to_json(), sort_keys=True))
    return 0


def _shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes i/N, e.g. 0/4, not {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"--shard {text}: need 0 <= i < N")
    return i, n


def cmd_featurize(args: argparse.Namespace) -> int:
    from .featurize import FeaturizeSettings, run_featurize

    settings = FeaturizeSettings(dataset=str(args.dataset.resolve()), device=args.device,
                                 include_unmeasured=args.include_unmeasured, gpu=args.gpu, cpu=args.cpu,
                                 shard=args.shard)
    with tqdm(unit="rec", desc="featurizing", file=sys.stderr, disable=args.quiet) as bar:
        def progress(records: int, files: int) -> None:
            bar.update(records)

        report = run_featurize(settings, args.out, jobs=args.jobs, on_progress=progress)
    print(f"store              {args.out}")
    print(f"records            {report.records}  (replayed {report.replayed}, failed {report.failed})")
    for reason, n in report.failure_reasons.items():
        print(f"  {reason}: {n}")
    print(f"time               {report.seconds:.1f} s  ({report.records_per_second:.1f} records/s)")
    print(json.dumps(report.to_json(), sort_keys=True))
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from .store.merge import merge

    n = merge(args.out, args.shards)
    print(f"merged {len(args.shards)} shards, {n} records -> {args.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pruner-train", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("info", help="summarize a TenSet dataset (no TVM needed)")
    p.add_argument("dataset", type=Path, help="TenSet dataset directory (dataset_gpu/, dataset_cpu/, ...)")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("featurize", help="replay records on TIR and write their features to an HDF5 store")
    p.add_argument("dataset", type=Path)
    p.add_argument("--out", type=Path, required=True, help="store to write (FILE.h5); FILE.h5.parts/ holds "
                   "the work of an interrupted run, which the same command resumes")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--shard", type=_shard, default=(0, 1), help="i/N: featurize every N-th record file")
    p.add_argument("--device", help="only measure_records/DEVICE/")
    p.add_argument("--include-unmeasured", action="store_true", help="also to_measure_programs/ (labels NaN)")
    p.add_argument("--gpu", default="k80", help="GPU constants for the analytic draft score of cuda records")
    p.add_argument("--cpu", default="epyc-zen3", help="CPU constants for the draft score of llvm records")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_featurize)

    p = sub.add_parser("merge", help="merge stores featurized as shards into one store")
    p.add_argument("shards", type=Path, nargs="+")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_merge)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (DatasetError, StoreError) as exc:
        print(f"pruner-train: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
