"""What the training commands share: a feature store made from --data on first use, and the metrics table."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

from ..errors import BadInput
from ..features import FEATURE_SCHEMA_VERSION
from ..features.schema import extractable_schemas
from ..progress import Progress


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
    from ..build_store import FeaturizeSettings, cached_store

    devices = devices or {}
    settings = FeaturizeSettings(dataset=str(data.resolve()), gpu=devices.get("cuda", {}).get("name"),
                                 cpu=devices.get("llvm", {}).get("name"), feature_schema=schema)
    with Progress(f"featurizing {data.name}", "rec", quiet=quiet) as bar:
        store, report = cached_store(settings, cache, jobs, on_progress=lambda records, units: bar.update(records))
    if report is not None:
        print(f"featurized {report.replayed}/{report.records} records of {data} in {report.seconds:.1f} s -> {store}",
              file=sys.stderr)
    return store


def schema_to_extract(module, data: Path) -> int:
    """The feature schema to featurize ``data`` with for ``module``: its own where this version
    extracts it (a store file is taken as it is, and checked against the model by the caller)."""
    schema = str(module.hparams.get("feature_schema", ""))
    return int(schema) if schema in extractable_schemas() and not data.is_file() else FEATURE_SCHEMA_VERSION


def store_schema(store: Path) -> str:
    from ..store.reader import FeatureStore

    return str(FeatureStore(store).meta.get("feature_schema", ""))


def lightning_progress(quiet: bool) -> bool:
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


def print_with_reference(results: dict[str, dict], reference: dict[str, dict]) -> None:
    """The models' table with the rows that cost nothing under it, and a note for each model that
    the analytic draft score beats."""
    from ..training.evaluate import below_the_draft

    print(_metrics_table({**results, **reference}))
    for name, r in results.items():
        note = below_the_draft(name, r, reference)
        if note:
            print(note)
