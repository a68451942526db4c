"""pruner-train pretrain: train cost models through the LightningCLI recipe (training/run.py)."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from ..errors import BadInput, dumps
from ..features.schema import extractable_schemas
from ..models.registry import MODEL_NAMES
from .options import bounded, data_args
from .stores import ensure_store, lightning_progress, print_with_reference, store_schema


def run(args: argparse.Namespace) -> int:
    from ..training.compare import train_models
    from ..training.run import check_recipes, check_trainer_flags

    # before a featurize run they would waste
    check_recipes(args.config)
    check_trainer_flags({"accelerator": args.accelerator, "devices": args.devices, "strategy": args.strategy,
                         "num_nodes": args.num_nodes})
    store = ensure_store(args.data, args.out / "features", args.jobs, args.quiet,
                         {kind: {"name": name} for kind, name in (("llvm", args.cpu), ("cuda", args.gpu)) if name})
    schema = store_schema(store)
    if schema not in extractable_schemas():
        # the models still train and evaluate on such stores; only a run of tune would find out
        warnings.warn(f"{store} holds features of schema {schema!r}, this version extracts schema "
                      f"{' or '.join(extractable_schemas())}: tune and adapt --follow will refuse the models "
                      "trained on it (featurize the dataset again to use them there)", stacklevel=1)
    results, last = train_models(
        store, args.split or "within_task", args.out, args.model, seed=args.seed, max_epochs=args.max_epochs,
        feature_schema=schema, progress=lightning_progress(args.quiet), quiet=args.quiet,
        accelerator=args.accelerator, devices=args.devices, strategy=args.strategy, num_nodes=args.num_nodes,
        extra_configs=args.config)
    skipped = {m: r["skipped"] for m, r in results.items() if "skipped" in r}
    if last is None:
        if skipped and len(skipped) == len(results):
            raise BadInput("pretrain: nothing to train: " + "; ".join(f"{m}: {why}" for m, why in skipped.items()))
        return 0  # another rank of a multi-process run: rank 0 reports
    reference = last.reference  # every model is tested on the same records
    print_with_reference(results, reference)
    for model, r in results.items():
        print(f"{model}: skipped, {r['skipped']}" if model in skipped else f"{model}: {r['checkpoint']}")
    if args.json:
        print(dumps({**results, "reference": reference}, sort_keys=True))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("pretrain", help="train cost models (default: PaCM and the draft model on the bundled data)")
    data_args(p, "default within_task")
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
    p.set_defaults(func=run)

