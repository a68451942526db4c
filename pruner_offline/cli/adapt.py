"""pruner-train adapt: adapt a model to a new device from records measured there (adapt/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import BadInput, dumps
from ..features.schema import extractable_schemas
from ..progress import Progress
from .options import add_options, bounded, settings_from
from .stores import ensure_store, schema_to_extract


def _adapt_device(args: argparse.Namespace, model_meta: dict, other_kinds: list[str]):
    """The model's own constants for the adapted target kind; --gpu/--cpu only where it recorded none."""
    from ..training.export import model_device

    if other_kinds:
        print(f"note: {args.checkpoint} was trained on {', '.join(other_kinds)} programs; adapting it to "
              f"{args.target} (cross-target: guarded fine-tunes it from the first retrain)", file=sys.stderr)
    option = "--gpu" if args.target == "cuda" else "--cpu"
    return model_device(args.target, {str(args.checkpoint): model_meta}, getattr(args, option[2:]), option,
                        other_kinds=True)


def _follow(args: argparse.Namespace, module, device, cfg, method: str) -> int:
    from ..adapt.follow import follow
    from ..sources.metaschedule import MetaScheduleLog
    from ..sources.tenset import TenSetLog

    if args.save is None:
        raise BadInput("adapt --follow needs --save MODEL.pt (the adapted model, replaced as it goes)")
    if args.records.is_dir():
        live = MetaScheduleLog(args.records)
    elif args.tasks is None:
        raise BadInput("adapt --follow on an Ansor record file needs --tasks DATASET (its task pickles)")
    else:
        live = TenSetLog(args.records, args.tasks)
    st = follow(module, live, args.target, device, method, cfg, args.save, save_every=args.save_every,
                idle_timeout=args.idle_timeout, max_records=args.max_records,
                on_event=lambda msg: print(msg, file=sys.stderr))
    written = args.save.is_file()
    print(dumps({"online_records": st.online, "rounds": st.rounds, "lines": st.lines,
                 "skipped": st.skipped, "model": str(args.save) if written else None}))
    if not written:  # a mistyped path waited out the idle timeout and looked like a run that worked
        seen = "never appeared" if not args.records.exists() else f"gave {st.online} usable records"
        print(f"pruner-train: {args.records}: {seen} in {args.idle_timeout:g} s; no model written to {args.save} "
              f"(a round is {cfg.round_size} records)", file=sys.stderr)
        return 2
    return 0


def run(args: argparse.Namespace) -> int:
    from ..adapt.config import METHODS, AdaptConfig
    from ..adapt.run import check_adapt_store, online_stream, write_adapted
    from ..adapt.simulate import plot_curves, simulate
    from ..atomic import check_replaceable
    from ..devices import device_to_json
    from ..training.export import load_model, trained_on_other_kinds

    # the model must read features of its own schema: the stores' (checked below), or, when
    # following a live run, the ones this version extracts
    if args.save is not None:
        check_replaceable(args.save)  # before the training whose model it would hold
    module, meta = load_model(args.checkpoint, expect_schema=extractable_schemas() if args.follow else None)
    other_kinds = trained_on_other_kinds(meta, [args.target])
    cfg = settings_from(AdaptConfig, args, cross_target=bool(other_kinds))
    methods = list(METHODS) if args.method == "all" else [args.method]
    device = _adapt_device(args, meta, other_kinds)
    if args.follow:
        if len(methods) != 1:
            raise BadInput("adapt --follow adapts with one --method, not all")
        return _follow(args, module, device, cfg, methods[0])
    if args.save is not None and len(methods) != 1:
        raise BadInput(f"--save names one model file, and --method all adapts {len(methods)}: leave --save out "
                       f"to write each to {args.out}/adapted_METHOD.pt")
    if args.save is not None and methods == ["frozen"]:
        raise BadInput("--method frozen adapts nothing, so there is no model to --save: it is the checkpoint itself")
    wanted = {args.target: device_to_json(device)}
    stores = [ensure_store(p, args.cache, args.jobs, args.quiet, wanted, schema_to_extract(module, p))
              for p in [args.records] + ([args.eval] if args.eval else [])]
    data = [check_adapt_store(store, args.checkpoint, module, args.target, device) for store in stores]
    stream, heldout = online_stream(data[0], data[1] if args.eval else None, args.eval_fraction)
    with Progress("adapting", "rec", len(stream), args.quiet) as bar:
        sim = simulate(module, methods, stream, heldout, cfg, eval_every=args.eval_every,
                       on_round=lambda n: bar.update(n - bar.done))
    curves = sim.curves
    if heldout is None:
        print("note: nothing held out, so no scores: --eval-fraction 0.25 (or --eval HELDOUT) scores each "
              "method on records it never trains on as adaptation goes", file=sys.stderr)
    else:
        print(f"{'records':>8}  " + "  ".join(f"{m:>17}" for m in curves))
        for i, pt in enumerate(next(iter(curves.values()))):
            cells = "  ".join(f"{c[i]['peak@1']:>8.3f}/{c[i]['peak@5']:<8.3f}" for c in curves.values())
            print(f"{pt['online_records']:>8}  {cells}")
        print("(held-out peak@1/peak@5)")
        args.out.mkdir(parents=True, exist_ok=True)
        png = args.out / "adapt_curves.png"
        plot_curves(curves, png, f"adapting {args.checkpoint.name} on {args.records.name}")
        print(f"plot: {png}")
    written = {w.method: w for w in write_adapted(sim.methods, args.checkpoint, args.records, args.target, device,
                                                  len(stream), args.save, args.out)}
    for m in sim.methods:
        w = written.get(m.name)
        print(f"frozen: the pretrained model, unchanged: {args.checkpoint}" if w is None else
              f"{w.method}: adapted on {len(stream)} records, {w.retrains} retrains"
              + (f", predicting with the {w.chosen} model" if w.chosen else "") + f" -> {w.path}")
    if args.json:
        print(dumps({"curves": {m: [{k: p[k] for k in ("online_records", "peak@1", "peak@5")} for p in pts]
                                for m, pts in curves.items()}, "models": {m: str(w.path) for m, w in written.items()}}))
    return 0


def add_parser(sub) -> None:
    from ..adapt.config import METHODS, AdaptConfig

    p = sub.add_parser("adapt", help="adapt a model to a new device from records measured there (MoA and others)")
    p.add_argument("--checkpoint", type=Path, required=True, help="pretrained model file (.pt)")
    p.add_argument("--target", choices=("cuda", "llvm"), required=True)
    p.add_argument("--records", type=Path, required=True,
                   help="online records: a TenSet dataset, a MetaSchedule database dir or a store .h5; with "
                        "--follow an Ansor record file or the database directory of a running tuning job")
    p.add_argument("--method", default=METHODS[0], choices=METHODS + ("all",),
                   help=f"default {METHODS[0]}: adapts only where fresh measurements show it ranks better")
    add_options(p, AdaptConfig, skip=("cross_target",))
    p.add_argument("--eval", type=Path, help="held-out records (same kinds as --records) scored as adaptation goes")
    p.add_argument("--eval-fraction", type=bounded(float, min=0, below=1), default=0.0,
                   help="without --eval: hold out the last FRACTION of each task's records for scoring")
    p.add_argument("--eval-every", type=bounded(int, min=1), default=50, help="online records between held-out scores")
    p.add_argument("--gpu", help="GPU constants for cuda records, where the model recorded none")
    p.add_argument("--cpu", help="CPU constants for llvm records, where the model recorded none")
    p.add_argument("--jobs", type=bounded(int, min=1), default=2)
    p.add_argument("--cache", type=Path, default=Path("runs/features"))
    p.add_argument("--out", type=Path, default=Path("runs/adapt"), help="where the adapted models and the curves PNG go")
    p.add_argument("--follow", action="store_true", help="follow --records while a tuning run appends to it")
    p.add_argument("--tasks", type=Path, help="with --follow on an Ansor record file: the TenSet dataset whose "
                   "network_info has the tasks")
    p.add_argument("--save", type=Path, help="the adapted model file of one --method (default: OUT/adapted_METHOD.pt); "
                   "with --follow, replaced atomically as it goes")
    p.add_argument("--save-every", type=bounded(int, min=1), default=1, help="with --follow: rounds between saves")
    p.add_argument("--idle-timeout", type=bounded(float, above=0), default=30.0, help="with --follow: stop after this long idle")
    p.add_argument("--max-records", type=bounded(int, min=1), help="with --follow: stop after this many online records")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)

