"""``pruner-train``: wires the stages together; each stage lives in its own package.

Options of the stages that have settings dataclasses (featurize, adapt, tune) are derived from
those dataclasses (cli_options.py), so a default is written once, where the stage defines it.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .bundled import default_dataset
from .cli_options import add_options, bounded, settings_from
from .errors import BadInput, crash_log, dumps, user_facing_warnings
from .features import FEATURE_SCHEMA_VERSION
from .features.schema import extractable_schemas
from .interrupts import exit_at_once, exit_code, terminate_as_interrupt
from .models.registry import MODEL_NAMES
from .progress import Progress
from .tenset.dataset import DatasetSummary, discover, load_task_index, summarize
from .tenset.splits import SplitError, parse_split


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


def cmd_info(args: argparse.Namespace) -> int:
    from .sources import open_source
    from .sources.metaschedule import MetaScheduleSource, summarize_database
    from .sources.metaschedule_runs import MetaScheduleRunsSource

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


def _split(text: str) -> str:
    try:
        parse_split(text)
    except SplitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """NAME=1x3x224x224 -> ("NAME", (1, 3, 224, 224))."""
    name, _, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.split("x"))
    except ValueError:
        shape = ()
    if not name or not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=DIMS with positive DIMS joined by x, "
                                         f"e.g. input=1x3x224x224")
    return name, shape


def cmd_featurize(args: argparse.Namespace) -> int:
    from .build_store import FeaturizeSettings, run_featurize
    from .executors import executor_for

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


def cmd_failures(args: argparse.Namespace) -> int:
    from .store.reader import FeatureStore

    failures = FeatureStore(args.store).failures()
    for path, line, reason in failures:
        print(f"{path}:{line}: {reason}")
    print(f"{len(failures)} records of {args.store} not featurized", file=sys.stderr)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from .collect.merge import is_collection, merge_collections
    from .store.merge import merge

    n = merge_collections(args.out, args.shards) if all(is_collection(p) for p in args.shards) else merge(args.out, args.shards)
    print(f"merged {len(args.shards)} shards, {n} records -> {args.out}")
    return 0


def cmd_check_replay(args: argparse.Namespace) -> int:
    from .replay.fidelity import OracleMissing, check_replay, format_table

    with Progress("checking", "rec", quiet=args.quiet) as bar:
        try:
            report = check_replay(args.dataset, args.sample, args.tol, on_record=lambda: bar.update(1))
        except OracleMissing as exc:
            print(f"pruner-train: {exc}", file=sys.stderr)
            return 2
    print(format_table(report))
    if args.json:
        print(dumps(report.to_json(), sort_keys=True))
    return 0


def ensure_store(data: Path, cache: Path, jobs: int, quiet: bool, devices: Optional[dict] = None,
                 schema: int = FEATURE_SCHEMA_VERSION) -> Path:
    """A feature store for ``data``: the file itself, or the source featurized into ``cache`` once.

    ``devices`` (target kind -> recorded constants, as model files keep them) and ``schema`` (the
    feature schema of a model) pick how the source is featurized, so that a model sees features
    made the way it was trained.
    """
    if data.is_file():
        return data
    if not data.is_dir():
        raise BadInput(f"{data}: no such store file or dataset directory")
    from .build_store import FeaturizeSettings, cached_store

    devices = devices or {}
    settings = FeaturizeSettings(dataset=str(data.resolve()), gpu=devices.get("cuda", {}).get("name"),
                                 cpu=devices.get("llvm", {}).get("name"), feature_schema=schema)
    with Progress(f"featurizing {data.name}", "rec", quiet=quiet) as bar:
        store, report = cached_store(settings, cache, jobs, on_progress=lambda records, units: bar.update(records))
    if report is not None:
        print(f"featurized {report.replayed}/{report.records} records of {data} in {report.seconds:.1f} s -> {store}",
              file=sys.stderr)
    return store


def _schema_to_extract(module, data: Path) -> int:
    """The feature schema to featurize ``data`` with for ``module``: its own where this version
    extracts it (a store file is taken as it is, and checked against the model by the caller)."""
    schema = str(module.hparams.get("feature_schema", ""))
    return int(schema) if schema in extractable_schemas() and not data.is_file() else FEATURE_SCHEMA_VERSION


def _store_schema(store: Path) -> str:
    from .store.reader import FeatureStore

    return str(FeatureStore(store).meta.get("feature_schema", ""))


def _lightning_progress(quiet: bool) -> bool:
    # Lightning's bar, like tqdm's, is a stream of carriage returns: only for a terminal
    return not quiet and sys.stderr.isatty()


def _metrics_table(rows: dict[str, dict]) -> str:
    cols = ["peak@1", "peak@5", "topk@1", "topk@5", "pairwise_acc", "records", "tasks", "train_seconds"]
    cols = [c for c in cols if any(c in r for r in rows.values())]
    width = max(9, *(len(n) + 1 for n in rows))
    lines = [f"{'model':<{width}}" + "".join(f"{c:>14}" for c in cols)]
    for name, r in rows.items():
        cells = "".join(f"{r[c]:>14.4f}" if isinstance(r.get(c), float) else f"{r.get(c, '-'):>14}" for c in cols)
        lines.append(f"{name:<{width}}{cells}")
    return "\n".join(lines)


def _print_with_reference(results: dict[str, dict], reference: dict[str, dict]) -> None:
    """The models' table with the rows that cost nothing under it, and a note for each model that
    the analytic draft score beats."""
    from .training.evaluate import below_the_draft

    print(_metrics_table({**results, **reference}))
    for name, r in results.items():
        note = below_the_draft(name, r, reference)
        if note:
            print(note)


def cmd_pretrain(args: argparse.Namespace) -> int:
    from .training.compare import train_models
    from .training.run import check_recipes, check_trainer_flags

    # before a featurize run they would waste
    check_recipes(args.config)
    check_trainer_flags({"accelerator": args.accelerator, "devices": args.devices, "strategy": args.strategy,
                         "num_nodes": args.num_nodes})
    store = ensure_store(args.data, args.out / "features", args.jobs, args.quiet,
                         {kind: {"name": name} for kind, name in (("llvm", args.cpu), ("cuda", args.gpu)) if name})
    schema = _store_schema(store)
    if schema not in extractable_schemas():
        # the models still train and evaluate on such stores; only a run of tune would find out
        warnings.warn(f"{store} holds features of schema {schema!r}, this version extracts schema "
                      f"{' or '.join(extractable_schemas())}: tune and adapt --follow will refuse the models "
                      "trained on it (featurize the dataset again to use them there)", stacklevel=1)
    results, last = train_models(
        store, args.split or "within_task", args.out, args.model, seed=args.seed, max_epochs=args.max_epochs,
        feature_schema=schema, progress=_lightning_progress(args.quiet), quiet=args.quiet,
        accelerator=args.accelerator, devices=args.devices, strategy=args.strategy, num_nodes=args.num_nodes,
        extra_configs=args.config)
    skipped = {m: r["skipped"] for m, r in results.items() if "skipped" in r}
    if last is None:
        if skipped and len(skipped) == len(results):
            raise BadInput("pretrain: nothing to train: " + "; ".join(f"{m}: {why}" for m, why in skipped.items()))
        return 0  # another rank of a multi-process run: rank 0 reports
    reference = last.reference  # every model is tested on the same records
    _print_with_reference(results, reference)
    for model, r in results.items():
        print(f"{model}: skipped, {r['skipped']}" if model in skipped else f"{model}: {r['checkpoint']}")
    if args.json:
        print(dumps({**results, "reference": reference}, sort_keys=True))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .training.evaluate import evaluate_model_file, plot_evaluation, reference_metrics
    from .training.export import load_model, recorded_devices

    module, meta = load_model(args.checkpoint)
    store = ensure_store(args.data, args.cache, args.jobs, args.quiet, recorded_devices(meta),
                         _schema_to_extract(module, args.data))
    ev, dm, split = evaluate_model_file(args.checkpoint, store, args.split, args.seed)
    name = args.checkpoint.stem
    scored = dm.n_labelled
    print(f"split {split}: {ev.records} of the {scored} labelled records scored, {ev.tasks} tasks"
          + ("" if args.split else "  (default: the model's own test split on its training data, else every record)"))
    reference = reference_metrics(dm, ev.rows, args.seed)
    _print_with_reference({name: ev.to_json()}, reference)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    for png in plot_evaluation(ev, dm, out / f"evaluate_{name}", name):
        print(f"plot: {png}")
    if args.json:
        print(dumps({**ev.to_json(), "split": split, "reference": reference}, sort_keys=True))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .training.compare import compare

    store = ensure_store(args.data, args.out / "features", args.jobs, args.quiet)
    split = args.split or "within_task"
    results, reference = compare(store, split, args.out, seed=args.seed, models=args.models,
                                  max_epochs=args.max_epochs, feature_schema=_store_schema(store), quiet=args.quiet)
    print(f"split {split}, seed {args.seed}, store {store}")
    _print_with_reference(results, reference)
    for name, r in results.items():
        if "skipped" in r:
            print(f"{name}: skipped, {r['skipped']}")
    if args.json:
        print(dumps({**results, "reference": reference}, sort_keys=True))
    return 0


def _adapt_device(args: argparse.Namespace, model_meta: dict, other_kinds: list[str]):
    """The model's own constants for the adapted target kind; --gpu/--cpu only where it recorded none."""
    from .training.export import model_device

    if other_kinds:
        print(f"note: {args.checkpoint} was trained on {', '.join(other_kinds)} programs; adapting it to "
              f"{args.target} (cross-target: guarded fine-tunes it from the first retrain)", file=sys.stderr)
    option = "--gpu" if args.target == "cuda" else "--cpu"
    return model_device(args.target, {str(args.checkpoint): model_meta}, getattr(args, option[2:]), option,
                        other_kinds=True)


def _follow(args: argparse.Namespace, module, device, cfg, method: str) -> int:
    from .adapt.follow import follow
    from .sources.metaschedule import MetaScheduleLog
    from .sources.tenset import TenSetLog

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


def cmd_adapt(args: argparse.Namespace) -> int:
    from .adapt.config import METHODS, AdaptConfig
    from .adapt.online import OnlineRecords, programs_of_store
    from .adapt.simulate import held_out_rows, plot_curves, simulate, tuning_order
    from .atomic import check_replaceable
    from .features.devices import device_to_json
    from .store.reader import FeatureStore
    from .training.export import check_same_devices, check_schema, load_model, trained_on_other_kinds

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
    stores = [ensure_store(p, args.cache, args.jobs, args.quiet, wanted, _schema_to_extract(module, p))
              for p in [args.records] + ([args.eval] if args.eval else [])]
    for store in stores:
        check_schema(args.checkpoint, module.hparams.get("feature_schema"), _store_schema(store))
        st = FeatureStore(store)
        data = st.load()
        if not data.n_records:
            raise BadInput(f"{store}: holds no records to adapt with ({st.failure_note() or 'none'})")
        kinds = {k.rpartition("|")[2] for k in data.task_keys}
        if kinds - {args.target}:
            raise BadInput(f"{store} holds {', '.join(sorted(kinds))} records, but --target is "
                           f"{args.target}: adapt to the device the records were measured on")
        check_same_devices(f"{args.checkpoint} (adapting with {device.name})", {"devices": wanted}, store,
                           st.meta.get("devices", {}))
    online = FeatureStore(stores[0]).load()
    order = tuning_order(online)
    heldout = FeatureStore(stores[1]).load() if args.eval else None
    if heldout is None and args.eval_fraction > 0:
        held = held_out_rows(online, args.eval_fraction)
        heldout = OnlineRecords(programs_of_store(online, np.flatnonzero(held))).data()
        order = order[~held[order]]
    stream = programs_of_store(online, order)
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
    models = _write_adapted(args, sim.methods, device, len(stream))
    if args.json:
        print(dumps({"curves": {m: [{k: p[k] for k in ("online_records", "peak@1", "peak@5")} for p in pts]
                                for m, pts in curves.items()}, "models": models}))
    return 0


def _write_adapted(args: argparse.Namespace, methods: list, device, n_online: int) -> dict[str, str]:
    """Each method's adapted model, as a model file (--save, or OUT/adapted_METHOD.pt); {method: path}."""
    from .adapt.model_file import adapted_meta
    from .training.export import export_model

    written: dict[str, str] = {}
    for m in methods:
        if m.name == "frozen":  # the pretrained model itself: a copy of it would only mislead
            print(f"frozen: the pretrained model, unchanged: {args.checkpoint}")
            continue
        path = args.save or args.out / f"adapted_{m.name}.pt"
        chosen = getattr(m, "chosen", None)
        export_model(m.predictor, path, {**adapted_meta(str(args.records), m, args.target, device, n_online),
                                         "pretrained": str(args.checkpoint)})
        print(f"{m.name}: adapted on {n_online} records, {m.retrains} retrains"
              + (f", predicting with the {chosen} model" if chosen else "") + f" -> {path}")
        written[m.name] = str(path)
    return written


def _network(args: argparse.Namespace):
    """The whole network --network, --exported-program or --onnx names."""
    if args.onnx:
        from .tuning.onnx_network import onnx_network

        return onnx_network(args.onnx, dict(args.input_shape or []))
    from .tuning.networks import load_exported_program, named_network, torch_network

    program = named_network(args.network) if args.network else load_exported_program(args.exported_program)
    return torch_network(program, args.network or str(args.exported_program))


def _measure_settings(args: argparse.Namespace, build_workers: int):
    from .measure.settings import MeasureSettings, RPCSettings

    if (args.rpc_tracker is None) != (args.rpc_key is None):
        raise BadInput("--rpc-tracker and --rpc-key go together: the tracker's address and the devices' key")
    try:
        rpc = RPCSettings.parse(args.rpc_tracker, args.rpc_key, session_timeout_s=args.run_timeout_s) if args.rpc_tracker else None
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    return settings_from(MeasureSettings, args, build_workers=build_workers, rpc=rpc)


def cmd_collect(args: argparse.Namespace) -> int:
    from .collect.run import collect
    from .collect.settings import CollectSettings
    from .collect.tasks import module_tasks, network_tasks, workload_tasks
    from .targets import tuning_target

    if args.input_shape and not args.onnx:
        raise BadInput("--input-shape fixes the dynamic input shapes of an --onnx model; give it with --onnx")
    settings = settings_from(CollectSettings, args, measure=_measure_settings(args, args.num_cores))
    if args.network or args.exported_program or args.onnx:
        tasks = network_tasks(_network(args), tuning_target(settings.target_kind, settings.num_cores, settings.device))
    elif args.module:
        tasks = module_tasks(args.module)
    else:
        tasks = workload_tasks(args.workload)
    with Progress("measuring", "prog", quiet=args.quiet) as bar, \
            exit_at_once(f"the same command continues from what {args.out} holds"):
        report = collect(tasks, args.out, settings, on_start=bar.set_total, on_measured=bar.update)
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
    if args.json:
        print(report.to_json())
    return 0


def _measure_options(p: argparse.ArgumentParser) -> None:
    from .measure.settings import MeasureSettings

    add_options(p, MeasureSettings, skip={"build_workers", "rpc"})
    p.add_argument("--rpc-tracker", metavar="HOST:PORT", help="measure on the devices of this TVM RPC tracker "
                   "(python -m tvm.exec.rpc_tracker; pip install 'pruner-offline[rpc]')")
    p.add_argument("--rpc-key", help="with --rpc-tracker: the key the devices' rpc_server registered with")


def _network_inputs(what, verb: str) -> None:
    what.add_argument("--network", help=f"a built-in network, every kernel of it {verb}: mlp, resnet18, bert-layer")
    what.add_argument("--exported-program", type=Path, help="a whole network saved with torch.export.save (.pt2), "
                      f"every kernel of it {verb}")
    what.add_argument("--onnx", type=Path, help=f"a whole network in an ONNX file, every kernel of it {verb} "
                      "(pip install 'pruner-offline[onnx]')")


def _input_shape_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input-shape", type=_input_shape, action="append", metavar="NAME=DIMS",
                   help="with --onnx: a static shape for an input the file leaves dynamic, e.g. input=1x3x224x224 "
                        "(repeat for several inputs)")


def cmd_tune(args: argparse.Namespace) -> int:
    from .measure.settings import MeasureSettings
    from .tuning.run import TuneReport, TuneSettings, tune
    from .tuning.workloads import load_module, named_workload

    try:
        settings = settings_from(TuneSettings, args, measure=MeasureSettings(build_workers=args.num_cores))
        if args.input_shape and not args.onnx:
            raise BadInput("--input-shape fixes the dynamic input shapes of an --onnx model; give it with --onnx")
        if args.network or args.exported_program or args.onnx:
            from .tuning.network_run import tune_network

            network = _network(args)
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


def _data_args(p: argparse.ArgumentParser, split_help: str) -> None:
    p.add_argument("--data", type=Path, default=default_dataset(),
                   help="a TenSet dataset, a MetaSchedule database directory or a directory of past tuning runs' "
                        "databases (featurized on first use, cached by content) or a feature store .h5 (default: the "
                        "bundled tenset-mini)")
    p.add_argument("--split", type=_split, help="within_task[:F] | by_task[:F[:SEED]] | fold:I/K[:SEED] | holdout:all_five | holdout:NET,NET | all; "
                   + split_help)
    p.add_argument("--seed", type=bounded(int, min=0), default=0)
    p.add_argument("--jobs", type=bounded(int, min=1), default=2, help="featurization workers when --data is a directory")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    from .adapt.config import METHODS, AdaptConfig
    from .build_store import FeaturizeSettings
    from .collect.settings import CollectSettings
    from .tuning.settings import TuneSettings

    parser = argparse.ArgumentParser(prog="pruner-train", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("info", help="summarize a TenSet dataset or MetaSchedule databases (no TVM needed)")
    p.add_argument("dataset", type=Path, help="TenSet dataset directory (dataset_gpu/, ...), a MetaSchedule database "
                   "or a directory of them")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=cmd_info)

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
    p.set_defaults(func=cmd_featurize)

    p = sub.add_parser("failures", help="list the records of a store that could not be featurized, as file:line: reason")
    p.add_argument("store", type=Path)
    p.set_defaults(func=cmd_failures)

    p = sub.add_parser("pretrain", help="train cost models (default: PaCM and the draft model on the bundled data)")
    _data_args(p, "default within_task")
    p.add_argument("--model", nargs="+", default=["pacm", "draft"], choices=MODEL_NAMES)
    p.add_argument("--out", type=Path, default=Path("runs/pretrain"), help="run directory (resumes if present)")
    p.add_argument("--max-epochs", type=bounded(int, min=1), help="override the recipe's 50")
    p.add_argument("--cpu", help="when --data is a directory: device constants of its CPU programs' draft score "
                   "(default epyc-7452); tune then uses them")
    p.add_argument("--gpu", help="the same for GPU programs (default h200)")
    p.add_argument("--accelerator", help="cpu, gpu, auto, ... (Lightning)")
    p.add_argument("--devices", help="e.g. 1, 4, auto (Lightning)")
    p.add_argument("--strategy", help="e.g. ddp (Lightning)")
    p.add_argument("--num-nodes", type=bounded(int, min=1), help="machines of a multi-node run (Lightning; "
                   "the launcher, e.g. srun or torchrun, starts the processes)")
    p.add_argument("--config", type=Path, nargs="*", default=[], help="extra LightningCLI YAML layered on the recipe")
    p.set_defaults(func=cmd_pretrain)

    p = sub.add_parser("evaluate", help="rank a dataset's records with a model file; table and plots")
    _data_args(p, "default: the model's own test split when --data is what it was trained on, else all")
    p.add_argument("--checkpoint", type=Path, required=True, help="a model file written by pretrain (.pt)")
    p.add_argument("--out", type=Path, default=Path("runs/evaluate"), help="where the PNG plots go")
    p.add_argument("--cache", type=Path, default=Path("runs/features"), help="where a featurized dataset is kept")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("compare", help="train every model on one split and seed; side-by-side table")
    _data_args(p, "default within_task")
    p.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    p.add_argument("--out", type=Path, default=Path("runs/compare"))
    p.add_argument("--max-epochs", type=bounded(int, min=1))
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("check-replay", help="compare replayed programs' per-store features with the "
                       "dataset's oracle/ (Ansor's own), per feature group")
    p.add_argument("dataset", type=Path)
    p.add_argument("--sample", type=bounded(int, min=0), default=0, help="records per record file, evenly spaced (0: all)")
    p.add_argument("--tol", type=bounded(float, above=0), default=0.05,
                   help="agreement tolerance on the log-scaled values")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=cmd_check_replay)

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
    p.set_defaults(func=cmd_adapt)

    p = sub.add_parser("tune", help="tune one workload, or a whole network, with MetaSchedule and a cost model (ours: "
                       "draft-then-verify); writes the database to --work-dir and, last, one JSON line")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--workload", help="a built-in workload: matmul, conv2d, conv2d-nhwc, depthwise, dense, "
                      "batch-matmul, matmul-small (or one of tuning.workloads.OTHER_SHAPES)")
    what.add_argument("--module", type=Path, help="a TIR module: TVMScript, or TVM's JSON (.json)")
    _network_inputs(what, "tuned")
    _input_shape_option(p)
    add_options(p, TuneSettings, skip={"measure"})
    p.add_argument("--work-dir", type=Path, required=True)
    p.add_argument("--quiet", action="store_true", help="MetaSchedule's progress to WORK_DIR/logs only; "
                   "the report line alone on the console")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("collect", help="make training data for a device: sample programs of every task, measure "
                       "them (resumable), into a MetaSchedule database that info, featurize and pretrain read")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--workload", nargs="+", help="built-in workloads (those of tune --workload)")
    what.add_argument("--module", type=Path, help="a TIR module file (TVMScript, or TVM's JSON as .json), or a "
                      "directory of them: one task each")
    _network_inputs(what, "a task")
    _input_shape_option(p)
    add_options(p, CollectSettings, skip={"measure"})
    _measure_options(p)
    # TenSet measured its CPU data with cold caches; a collection is training data, so it does too
    p.set_defaults(cpu_cache_flush=True)
    p.add_argument("--out", type=Path, required=True, help="the collection's directory: database, collect.json "
                   "(settings, machine, runs), failures.jsonl; the same command continues what it holds")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser("merge", help="merge shards into one: stores featurized with --shard, or collections "
                       "collected with --shard")
    p.add_argument("shards", type=Path, nargs="+")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_merge)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with user_facing_warnings(), terminate_as_interrupt():
            return args.func(args)
    except BadInput as exc:
        print(f"pruner-train: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a read-only or missing path: the user's to fix, not a bug
        print(f"pruner-train: {f'{exc.filename}: ' if exc.filename else ''}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("pruner-train: interrupted", file=sys.stderr)
        return exit_code(exc)
    except Exception as exc:  # noqa: BLE001 - whatever it is, the user gets one line and a log, not a traceback
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        print(f"pruner-train: internal error ({type(exc).__name__}: {first}): this is a bug in pruner-offline; "
              f"the traceback is in {crash_log(exc)}, please attach it to a report", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
