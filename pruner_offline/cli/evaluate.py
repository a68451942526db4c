"""pruner-train evaluate: rank a dataset's records with a model file; table and plots."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import dumps
from .options import data_args
from .stores import ensure_store, print_with_reference, schema_to_extract


def run(args: argparse.Namespace) -> int:
    from ..training.evaluate import evaluate_model_file, plot_evaluation, reference_metrics
    from ..training.export import load_model, recorded_devices

    module, meta = load_model(args.checkpoint)
    store = ensure_store(args.data, args.cache, args.jobs, args.quiet, recorded_devices(meta),
                         schema_to_extract(module, args.data))
    ev, dm, split = evaluate_model_file(args.checkpoint, store, args.split, args.seed)
    name = args.checkpoint.stem
    scored = dm.n_labelled
    print(f"split {split}: {ev.records} of the {scored} labelled records scored, {ev.tasks} tasks"
          + ("" if args.split else "  (default: the model's own test split on its training data, else every record)"))
    reference = reference_metrics(dm, ev.rows, args.seed)
    print_with_reference({name: ev.to_json()}, reference)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    for png in plot_evaluation(ev, dm, out / f"evaluate_{name}", name):
        print(f"plot: {png}")
    if args.json:
        print(dumps({**ev.to_json(), "split": split, "reference": reference}, sort_keys=True))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="rank a dataset's records with a model file; table and plots")
    data_args(p, "default: the model's own test split when --data is what it was trained on, else all")
    p.add_argument("--checkpoint", type=Path, required=True, help="a model file written by pretrain (.pt)")
    p.add_argument("--out", type=Path, default=Path("runs/evaluate"), help="where the PNG plots go")
    p.add_argument("--cache", type=Path, default=Path("runs/features"), help="where a featurized dataset is kept")
    p.set_defaults(func=run)

