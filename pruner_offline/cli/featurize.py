"""pruner-train featurize: every program of a source replayed on TIR, its features into an HDF5 store."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import dumps
from ..progress import Progress
from .options import add_options, bounded, settings_from


def run(args: argparse.Namespace) -> int:
    from ..build_store import FeaturizeSettings, run_featurize
    from ..executors import executor_for

    settings = settings_from(FeaturizeSettings, args, dataset=str(args.dataset.resolve()))
    executor = executor_for(args.jobs, args.ray)
    with Progress("featurizing", "rec", quiet=args.quiet) as bar:
        report = run_featurize(settings, args.out, on_progress=lambda records, units: bar.update(records),
                               executor=executor)
    print(f"store              {args.out}")
    print(f"records            {report.records}  (replayed {report.replayed}, failed {report.failed})")
    for reason, n in report.failure_reasons.items():
        print(f"  {reason}: {n}")
    print(f"unreadable lines   {report.bad_lines}")
    for example in report.examples:
        print(f"  {example}")
    if report.failed or report.bad_lines:
        print(f"where              pruner-train failures {args.out}  (file:line: reason of each)")
    print(f"time               {report.seconds:.1f} s  ({report.records_per_second:.1f} records/s)")
    print(dumps(report.to_json(), sort_keys=True))
    return 0


def add_parser(sub) -> None:
    from ..build_store import FeaturizeSettings

    p = sub.add_parser("featurize", help="schedule every program of a source on TIR and write its features to an "
                       "HDF5 store")
    p.add_argument("dataset", type=Path, help="a TenSet dataset or a MetaSchedule database directory")
    p.add_argument("--out", type=Path, required=True, help="store to write (FILE.h5); FILE.h5.parts/ holds "
                   "the work of an interrupted run, which the same command resumes")
    p.add_argument("--jobs", type=bounded(int, min=1), default=1, help="worker processes (with --ray and no "
                   "ADDRESS: the local Ray instance's CPUs)")
    p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS", help="run the record files as tasks on a Ray "
                   "cluster (ADDRESS, e.g. auto or ray://head:10001) or, without ADDRESS, a local Ray instance; "
                   "FILE.h5.parts/ must be on storage every node shares (pip install 'pruner-offline[ray]')")
    add_options(p, FeaturizeSettings, skip={"dataset"})
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)

