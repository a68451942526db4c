"""pruner-train collect: training data for a device, measured and resumable (collect/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import BadInput
from ..interrupts import exit_at_once
from ..progress import Progress
from .measuring import input_shape_option, measure_options, measure_settings, network_inputs, network_of
from .options import add_options, settings_from


def run(args: argparse.Namespace) -> int:
    from ..collect.run import collect
    from ..collect.settings import CollectSettings
    from ..collect.tasks import module_tasks, network_tasks, workload_tasks
    from ..targets import tuning_target

    if args.input_shape and not args.onnx:
        raise BadInput("--input-shape fixes the dynamic input shapes of an --onnx model; give it with --onnx")
    settings = settings_from(CollectSettings, args, measure=measure_settings(args, args.num_cores))
    if args.records_device and not args.tenset:
        raise BadInput("--records-device names the measure_records/ directory of a --tenset collection; "
                       "give it with --tenset")
    if args.tenset:
        from ..collect.tenset import collect_tenset, default_device_name

        device = args.records_device or default_device_name(settings)
        with Progress("measuring", "prog", quiet=args.quiet) as bar, \
                exit_at_once(f"the same command continues from what {args.out} holds"):
            report = collect_tenset(args.tenset, args.out, settings, device, on_start=bar.set_total,
                                    on_measured=bar.update)
        return _summary(report, args.json)
    if args.network or args.exported_program or args.onnx:
        tasks = network_tasks(network_of(args), tuning_target(settings.target_kind, settings.num_cores, settings.device))
    elif args.module:
        tasks = module_tasks(args.module)
    else:
        tasks = workload_tasks(args.workload)
    with Progress("measuring", "prog", quiet=args.quiet) as bar, \
            exit_at_once(f"the same command continues from what {args.out} holds"):
        report = collect(tasks, args.out, settings, on_start=bar.set_total, on_measured=bar.update)
    return _summary(report, args.json)


def _summary(report, as_json: bool) -> int:
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    failed = sum(report.failed.values())
    print(f"database           {report.out}  (shard {report.shard})")
    print(f"tasks              {report.tasks}  ({len(report.exhausted)} whose space ran out first)")
    for name, n in report.exhausted.items():
        print(f"  {name}: {n} distinct programs found")
    print(f"measured           {report.measured}  (now {report.held} in all)")
    print(f"failed             {failed}" + (f"  ({', '.join(f'{k}: {v}' for k, v in report.failed.items())})"
                                            if failed else ""))
    print(f"duplicates         {report.duplicates}  (drawn again, not measured)")
    print(f"time               {report.seconds:.1f} s  ({report.programs_per_second:.2f} programs/s)")
    if as_json:
        print(report.to_json())
    return 0


def add_parser(sub) -> None:
    from ..collect.settings import CollectSettings

    p = sub.add_parser("collect", help="make training data for a device: sample programs of every task, measure "
                       "them (resumable), into a MetaSchedule database that info, featurize and pretrain read")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--workload", nargs="+", help="built-in workloads (those of tune --workload)")
    what.add_argument("--module", type=Path, help="a TIR module file (TVMScript, or TVM's JSON as .json), or a "
                      "directory of them: one task each")
    network_inputs(what, "a task")
    what.add_argument("--tenset", type=Path, metavar="DIR", help="a TenSet dataset: the programs of its "
                      "to_measure_programs/ for --target, replayed on TIR, into OUT/measure_records/DEVICE/ "
                      "in TenSet's layout (the first --programs-per-task of each file)")
    p.add_argument("--records-device", metavar="NAME", help="with --tenset: the DEVICE directory of "
                   "measure_records/ (default: --device, else this CPU's model name)")
    input_shape_option(p)
    add_options(p, CollectSettings, skip={"measure"})
    measure_options(p)
    # TenSet measured its CPU data with cold caches; a collection is training data, so it does too
    p.set_defaults(cpu_cache_flush=True)
    p.add_argument("--out", type=Path, required=True, help="the collection's directory: database, collect.json "
                   "(settings, machine, runs), failures.jsonl; the same command continues what it holds")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=run)

