"""``pruner-train``: wires the stages together; each stage lives in its own package."""

from __future__ import annotations

import argparse
import sys

import numpy as np
from pathlib import Path
from typing import Optional, Sequence

from tqdm import tqdm

from .errors import BadInput, crash_log, dumps
from .models.registry import MODEL_NAMES
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
        print(dumps(summary.to_json(), sort_keys=True))
    return 0


def _int_from(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, not {value}")
        return value
    return parse


def _number_in(low: float, high: float, low_open: bool = False, high_open: bool = False):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
        if not ((low < value if low_open else low <= value) and (value < high if high_open else value <= high)):
            raise argparse.ArgumentTypeError(
                f"must lie in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}, not {text}")
        return value
    return parse


def _split(text: str) -> str:
    try:
        parse_split(text)
    except SplitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


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
    print(f"unreadable lines   {report.bad_lines}")
    for example in report.examples:
        print(f"  {example}")
    print(f"time               {report.seconds:.1f} s  ({report.records_per_second:.1f} records/s)")
    print(dumps(report.to_json(), sort_keys=True))
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from .store.merge import merge

    n = merge(args.out, args.shards)
    print(f"merged {len(args.shards)} shards, {n} records -> {args.out}")
    return 0


def cmd_check_replay(args: argparse.Namespace) -> int:
    from .replay.fidelity import OracleMissing, check_replay, format_table

    with tqdm(unit="rec", desc="checking", file=sys.stderr, disable=args.quiet) as bar:
        try:
            report = check_replay(args.dataset, args.sample, args.tol, on_record=lambda: bar.update(1))
        except OracleMissing as exc:
            print(f"pruner-train: {exc}", file=sys.stderr)
            return 2
    print(format_table(report))
    if args.json:
        print(dumps(report.to_json(), sort_keys=True))
    return 0


BUNDLED_DATASET = Path(__file__).resolve().parents[1] / "datasets" / "tenset-mini"


def ensure_store(data: Path, cache: Path, jobs: int, quiet: bool, gpu: str = "k80", cpu: str = "epyc-7452") -> Path:
    """A feature store for ``data``: the file itself, or the dataset featurized into ``cache`` once."""
    if data.is_file():
        return data
    if not data.is_dir():
        raise BadInput(f"{data}: no such store file or dataset directory")
    from .featurize import FeaturizeSettings, run_featurize

    settings = FeaturizeSettings(dataset=str(data.resolve()), gpu=gpu, cpu=cpu)
    store = cache / f"{data.resolve().name}-{gpu}-{cpu}.h5"
    if store.is_file():
        return store
    cache.mkdir(parents=True, exist_ok=True)
    print(f"featurizing {data} -> {store}", file=sys.stderr)
    with tqdm(unit="rec", desc="featurizing", file=sys.stderr, disable=quiet) as bar:
        report = run_featurize(settings, store, jobs=jobs, on_progress=lambda records, files: bar.update(records))
    print(f"featurized {report.replayed}/{report.records} records in {report.seconds:.1f} s", file=sys.stderr)
    return store


def _store_schema(store: Path) -> str:
    from .store.reader import FeatureStore

    return str(FeatureStore(store).meta.get("feature_schema", ""))


def _metrics_table(rows: dict[str, dict]) -> str:
    cols = ["peak@1", "peak@5", "topk@1", "topk@5", "pairwise_acc", "records", "tasks", "train_seconds"]
    cols = [c for c in cols if any(c in r for r in rows.values())]
    lines = ["model    " + "".join(f"{c:>14}" for c in cols)]
    for name, r in rows.items():
        cells = "".join(f"{r[c]:>14.4f}" if isinstance(r.get(c), float) else f"{r.get(c, '-'):>14}" for c in cols)
        lines.append(f"{name:<9}{cells}")
    return "\n".join(lines)


def cmd_pretrain(args: argparse.Namespace) -> int:
    from .training.compare import train_gbdt
    from .training.run import pretrain

    store = ensure_store(args.data, args.out / "features", args.jobs, args.quiet)
    schema = _store_schema(store)
    results: dict[str, dict] = {}
    for model in args.model:
        if model == "gbdt":
            metrics, seconds = train_gbdt(store, args.split, args.seed)
            results[model] = {**metrics, "train_seconds": round(seconds, 2), "checkpoint": None}
            continue
        r = pretrain(store, model, args.split, args.out, max_epochs=args.max_epochs, seed=args.seed,
                     accelerator=args.accelerator, devices=args.devices, strategy=args.strategy,
                     extra_configs=args.config, progress=not args.quiet, feature_schema=schema)
        results[model] = {**r.evaluation.to_json(), "train_seconds": round(r.train_seconds, 2),
                          "checkpoint": str(r.model_file)}
    print(_metrics_table(results))
    for model, r in results.items():
        where = r["checkpoint"] or "no checkpoint (scikit-learn models are not saved: loading them would need pickle)"
        print(f"{model}: {where}")
    if args.json:
        print(dumps(results, sort_keys=True))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .training.evaluate import evaluate_model_file, plot_evaluation

    store = ensure_store(args.data, args.cache, args.jobs, args.quiet)
    ev, dm = evaluate_model_file(args.checkpoint, store, args.split, args.seed)
    name = args.checkpoint.stem
    print(_metrics_table({name: ev.to_json()}))
    out = args.out or args.checkpoint.parent
    out.mkdir(parents=True, exist_ok=True)
    for png in plot_evaluation(ev, dm, out / f"evaluate_{name}", name):
        print(f"plot: {png}")
    if args.json:
        print(dumps(ev.to_json(), sort_keys=True))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .training.compare import compare

    store = ensure_store(args.data, args.out / "features", args.jobs, args.quiet)
    results = compare(store, args.split, args.out, seed=args.seed, models=args.models,
                      max_epochs=args.max_epochs, feature_schema=_store_schema(store))
    print(f"split {args.split}, seed {args.seed}, store {store}")
    print(_metrics_table(results))
    for name, r in results.items():
        if "skipped" in r:
            print(f"{name}: skipped, {r['skipped']}")
    if args.json:
        print(dumps(results, sort_keys=True))
    return 0


def cmd_adapt(args: argparse.Namespace) -> int:
    from .adapt.follow import follow
    from .adapt.methods import METHODS, AdaptConfig
    from .adapt.online import OnlineRecords, programs_of_store
    from .adapt.simulate import held_out_rows, plot_curves, simulate, tuning_order
    from .store.reader import FeatureStore
    from .tenset.dataset import discover, load_task_index
    from .training.export import check_schema, load_model

    module, _ = load_model(args.checkpoint)
    cfg = AdaptConfig(momentum=args.momentum, round_size=args.round, retrain_every=args.retrain_every,
                      epochs=args.epochs, seed=args.seed)
    methods = list(METHODS) if args.method == "all" else [args.method]
    device = args.gpu if args.target == "cuda" else args.cpu
    if args.follow:
        from .features import FEATURE_SCHEMA_VERSION

        if len(methods) != 1 or args.tasks is None or args.save is None:
            raise SystemExit("pruner-train adapt --follow needs one --method, --tasks DATASET (its task pickles) "
                             "and --save MODEL.pt")
        check_schema(args.checkpoint, module.hparams.get("feature_schema"), str(FEATURE_SCHEMA_VERSION))
        st = follow(module, args.records, load_task_index(discover(args.tasks)), args.target, device, methods[0],
                    cfg, args.save, save_every=args.save_every, idle_timeout=args.idle_timeout,
                    max_records=args.max_records, on_event=lambda msg: print(msg, file=sys.stderr))
        print(dumps({"online_records": st.online, "rounds": st.rounds, "lines": st.lines,
                          "skipped": st.skipped, "model": str(args.save)}))
        return 0
    stores = [ensure_store(p, args.cache, args.jobs, args.quiet, gpu=args.gpu, cpu=args.cpu)
              for p in [args.records] + ([args.eval] if args.eval else [])]
    for store in stores:
        check_schema(args.checkpoint, module.hparams.get("feature_schema"), _store_schema(store))
        data = FeatureStore(store).load()
        if not data.n_records:
            raise BadInput(f"{store}: holds no records to adapt with ({FeatureStore(store).failure_note() or 'none'})")
        kinds = {k.rpartition("|")[2] for k in data.task_keys}
        if kinds - {args.target}:
            raise SystemExit(f"pruner-train: {store} holds {', '.join(sorted(kinds))} records, but --target is "
                             f"{args.target}: adapt to the device the records were measured on")
    online = FeatureStore(stores[0]).load()
    order = tuning_order(online)
    heldout = FeatureStore(stores[1]).load() if args.eval else None
    if heldout is None and args.eval_fraction > 0:
        held = held_out_rows(online, args.eval_fraction)
        heldout = OnlineRecords(programs_of_store(online, np.flatnonzero(held))).data()
        order = order[~held[order]]
    stream = programs_of_store(online, order)
    with tqdm(total=len(stream), unit="rec", desc="adapting", file=sys.stderr, disable=args.quiet) as bar:
        curves = simulate(module, methods, stream, heldout, cfg, eval_every=args.eval_every,
                          on_round=lambda n: bar.update(n - bar.n))
    if heldout is not None:
        print(f"{'records':>8}  " + "  ".join(f"{m:>17}" for m in curves))
        for i, pt in enumerate(next(iter(curves.values()))):
            cells = "  ".join(f"{c[i]['peak@1']:>8.3f}/{c[i]['peak@5']:<8.3f}" for c in curves.values())
            print(f"{pt['online_records']:>8}  {cells}")
        print("(held-out peak@1/peak@5)")
        args.out.mkdir(parents=True, exist_ok=True)
        png = args.out / "adapt_curves.png"
        plot_curves(curves, png, f"adapting {args.checkpoint.name} on {args.records.name}")
        print(f"plot: {png}")
    if args.json:
        print(dumps({m: [{k: p[k] for k in ("online_records", "peak@1", "peak@5")} for p in pts]
                          for m, pts in curves.items()}))
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from .tuning.build import MeasureSettings
    from .tuning.run import TuneSettings, tune
    from .tuning.workloads import load_module, named_workload

    try:
        mod = named_workload(args.workload) if args.workload else load_module(args.module)
        settings = TuneSettings(
            target_kind=args.target, trials=args.trials, cost_model=args.cost_model,
            checkpoint=args.checkpoint and str(args.checkpoint), draft=args.draft and str(args.draft),
            verify_fraction=args.verify_fraction, online_epochs=args.online_epochs, online_method=args.online_method,
            trials_per_batch=args.trials_per_batch, population_size=args.population, num_cores=args.cores,
            seed=args.seed, device=args.device, measure=MeasureSettings(build_workers=args.cores))
        report = tune(mod, args.workload or str(args.module), args.work_dir, settings)
    except (KeyError, ValueError, OSError, RuntimeError) as exc:
        print(f"pruner-train tune: {exc}", file=sys.stderr)
        return 2
    print(report.to_json())
    return 0


def _data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=BUNDLED_DATASET,
                   help="a TenSet dataset directory (featurized on first use) or a feature store .h5 "
                        "(default: the bundled tenset-mini)")
    p.add_argument("--split", type=_split, default="within_task",
                   help="within_task[:F] | by_task[:F[:SEED]] | holdout:all_five | holdout:NET,NET")
    p.add_argument("--seed", type=_int_from(0), default=0)
    p.add_argument("--jobs", type=_int_from(1), default=2, help="featurization workers when --data is a directory")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true")


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
    p.add_argument("--jobs", type=_int_from(1), default=1, help="worker processes")
    p.add_argument("--shard", type=_shard, default=(0, 1), help="i/N: featurize every N-th record file")
    p.add_argument("--device", help="only measure_records/DEVICE/")
    p.add_argument("--include-unmeasured", action="store_true", help="also to_measure_programs/ (labels NaN)")
    p.add_argument("--gpu", default="k80", help="GPU constants for the analytic draft score of cuda records")
    p.add_argument("--cpu", default="epyc-7452", help="CPU constants for the draft score of llvm records")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_featurize)

    p = sub.add_parser("pretrain", help="train cost models (default: PaCM and the draft model on the bundled data)")
    _data_args(p)
    p.add_argument("--model", nargs="+", default=["pacm", "draft"], choices=MODEL_NAMES)
    p.add_argument("--out", type=Path, default=Path("runs/pretrain"), help="run directory (resumes if present)")
    p.add_argument("--max-epochs", type=_int_from(1), help="override the recipe's 50")
    p.add_argument("--accelerator", help="cpu, gpu, auto, ... (Lightning)")
    p.add_argument("--devices", help="e.g. 1, 4, auto (Lightning)")
    p.add_argument("--strategy", help="e.g. ddp (Lightning)")
    p.add_argument("--config", type=Path, nargs="*", default=[], help="extra LightningCLI YAML layered on the recipe")
    p.set_defaults(func=cmd_pretrain)

    p = sub.add_parser("evaluate", help="rank a store's test split with a model file; table and plots")
    _data_args(p)
    p.add_argument("--checkpoint", type=Path, required=True, help="a model file written by pretrain (.pt)")
    p.add_argument("--out", type=Path, help="where the PNG plots go (default: beside the checkpoint)")
    p.add_argument("--cache", type=Path, default=Path("runs/features"), help="where a featurized dataset is kept")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("compare", help="train every model on one split and seed; side-by-side table")
    _data_args(p)
    p.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    p.add_argument("--out", type=Path, default=Path("runs/compare"))
    p.add_argument("--max-epochs", type=_int_from(1))
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("check-replay", help="compare replayed programs' per-store features with the "
                       "dataset's oracle/ (Ansor's own), per feature group")
    p.add_argument("dataset", type=Path)
    p.add_argument("--sample", type=_int_from(0), default=0, help="records per record file, evenly spaced (0: all)")
    p.add_argument("--tol", type=_number_in(0, float("inf"), low_open=True), default=0.05,
                   help="agreement tolerance on the log-scaled values")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_check_replay)

    p = sub.add_parser("adapt", help="adapt a model to a new device from records measured there (MoA and others)")
    p.add_argument("--checkpoint", type=Path, required=True, help="pretrained model file (.pt)")
    p.add_argument("--target", choices=("cuda", "llvm"), required=True)
    p.add_argument("--records", type=Path, required=True,
                   help="online records: a TenSet dataset, a MetaSchedule database dir, a store .h5, "
                        "or with --follow a TenSet record file being written")
    p.add_argument("--method", default="moa", choices=("moa", "finetune", "scratch", "frozen", "all"))
    p.add_argument("--eval", type=Path, help="held-out records (same kinds as --records) scored as adaptation goes")
    p.add_argument("--eval-fraction", type=_number_in(0, 1, high_open=True), default=0.0,
                   help="without --eval: hold out the last FRACTION of each task's records for scoring")
    p.add_argument("--round", type=_int_from(1), default=10, help="programs measured per round")
    p.add_argument("--retrain-every", type=_int_from(1), default=4, help="rounds between retrains")
    p.add_argument("--momentum", type=_number_in(0, 1), default=0.99)
    p.add_argument("--epochs", type=_int_from(1), default=20, help="epochs over the online records per retrain")
    p.add_argument("--eval-every", type=_int_from(1), default=50, help="online records between held-out scores")
    p.add_argument("--gpu", default="h200", help="device constants of the GPU adapted to (--target cuda)")
    p.add_argument("--cpu", default="epyc-7452", help="device constants of the CPU adapted to (--target llvm)")
    p.add_argument("--seed", type=_int_from(0), default=0)
    p.add_argument("--jobs", type=_int_from(1), default=2)
    p.add_argument("--cache", type=Path, default=Path("runs/features"))
    p.add_argument("--out", type=Path, default=Path("runs/adapt"), help="where the curves PNG goes")
    p.add_argument("--follow", action="store_true", help="tail --records while a tuning run appends to it")
    p.add_argument("--tasks", type=Path, help="with --follow: the TenSet dataset whose network_info has the tasks")
    p.add_argument("--save", type=Path, help="with --follow: the adapted model file, replaced atomically")
    p.add_argument("--save-every", type=_int_from(1), default=1, help="with --follow: rounds between saves")
    p.add_argument("--idle-timeout", type=_number_in(0, float("inf"), low_open=True), default=30.0,
                   help="with --follow: stop after this long idle")
    p.add_argument("--max-records", type=_int_from(1), help="with --follow: stop after this many online records")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_adapt)

    p = sub.add_parser("tune", help="tune one workload with MetaSchedule and a cost model (ours: draft-then-verify); "
                       "writes the database to --work-dir and, last, one JSON line")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--workload", help="a built-in workload: matmul, conv2d, conv2d-nhwc, dense, batch-matmul, matmul-small")
    what.add_argument("--module", type=Path, help="a TIR module: TVMScript, or TVM's JSON (.json)")
    p.add_argument("--target", choices=["llvm", "cuda"], default="llvm", help="cuda needs a visible GPU to measure on")
    p.add_argument("--trials", type=_int_from(1), required=True)
    p.add_argument("--cost-model", choices=["pruner", "xgb", "mlp", "random"], default="pruner")
    p.add_argument("--checkpoint", type=Path, help="pruner: PaCM model file (without it, the draft order alone); "
                   "mlp: a TenSet-MLP model file (required)")
    p.add_argument("--draft", type=Path, help="pruner: learned draft model file (default: the analytic draft score)")
    p.add_argument("--verify-fraction", type=_number_in(0, 1, low_open=True), default=0.2,
                   help="pruner: share of candidates PaCM re-ranks")
    p.add_argument("--online-epochs", type=_int_from(0), default=0,
                   help="pruner: retrain PaCM on the programs measured so far, this many epochs after each batch")
    p.add_argument("--online-method", choices=("retrain", "moa"), default="retrain",
                   help="with --online-epochs: plain retraining of a copy, or MoA (momentum online adaptation)")
    p.add_argument("--work-dir", type=Path, required=True)
    p.add_argument("--seed", type=_int_from(0))
    p.add_argument("--trials-per-batch", type=_int_from(1), default=16)
    p.add_argument("--population", type=_int_from(1), default=512, help="evolutionary search population")
    p.add_argument("--cores", type=_int_from(1), default=2, help="target num-cores and build workers")
    p.add_argument("--device", help="device constants of the analytic draft score (default: featurize's)")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("merge", help="merge stores featurized as shards into one store")
    p.add_argument("shards", type=Path, nargs="+")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_merge)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BadInput as exc:
        print(f"pruner-train: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a read-only or missing path: the user's to fix, not a bug
        print(f"pruner-train: {f'{exc.filename}: ' if exc.filename else ''}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pruner-train: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - whatever it is, the user gets one line and a log, not a traceback
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        print(f"pruner-train: internal error ({type(exc).__name__}: {first}): this is a bug in pruner-offline; "
              f"the traceback is in {crash_log(exc)}, please attach it to a report", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
