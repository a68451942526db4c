"""pruner-train tune: one workload or a whole network tuned with MetaSchedule and a cost model (tuning/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import BadInput
from ..interrupts import exit_at_once
from .measuring import input_shape_option, measure_options, measure_settings, network_inputs, network_of
from .options import add_options, settings_from


def run(args: argparse.Namespace) -> int:
    from ..tuning.run.workload import TuneReport, TuneSettings, tune
    from ..tuning.frontends.workloads import load_module, named_workload

    try:
        settings = settings_from(TuneSettings, args, measure=measure_settings(args, args.num_cores))
        if args.input_shape and not args.onnx:
            raise BadInput("--input-shape fixes the dynamic input shapes of an --onnx model; give it with --onnx")
        if args.network or args.exported_program or args.onnx:
            from ..tuning.run.network import tune_network

            network = network_of(args)
            with exit_at_once(f"the same command continues from what {args.work_dir} holds"):
                report = tune_network(network, args.work_dir, settings, quiet=args.quiet)[0]
        else:
            mod = named_workload(args.workload) if args.workload else load_module(args.module)
            with exit_at_once(f"the same command continues from the trials measured in {args.work_dir}"):
                report = tune(mod, args.workload or str(args.module), args.work_dir, settings, quiet=args.quiet)
    except (KeyError, ValueError, OSError, RuntimeError) as exc:
        print(f"pruner-train tune: {exc}", file=sys.stderr)
        return 2
    print(report.to_json())
    if isinstance(report, TuneReport) and report.best_latency_s is None and report.trials:
        # every candidate failed to build or run: a report of nulls that exited 0 looked like a result
        print(f"pruner-train tune: none of the {report.trials} candidates built and ran; MetaSchedule's logs "
              f"in {Path(args.work_dir) / 'logs'} say why", file=sys.stderr)
        return 2
    return 0


def add_parser(sub) -> None:
    from ..tuning.settings import TuneSettings

    p = sub.add_parser("tune", help="tune one workload, or a whole network, with MetaSchedule and a cost model (ours: "
                       "draft-then-verify); writes the database to --work-dir and, last, one JSON line")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--workload", help="a built-in workload: matmul, conv2d, conv2d-nhwc, depthwise, dense, "
                      "batch-matmul, grouped-conv2d, dense-gelu, gemv, softmax, layer-norm, matmul-small (or one "
                      "of tuning.frontends.workloads.OTHER_SHAPES)")
    what.add_argument("--module", type=Path, help="a TIR module: TVMScript, or TVM's JSON (.json)")
    network_inputs(what, "tuned")
    input_shape_option(p)
    add_options(p, TuneSettings, skip={"measure"})
    measure_options(p)
    p.add_argument("--work-dir", type=Path, required=True)
    p.add_argument("--quiet", action="store_true", help="MetaSchedule's progress to WORK_DIR/logs only; "
                   "the report line alone on the console")
    p.set_defaults(func=run)

