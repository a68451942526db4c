"""Featurize a TenSet dataset into one HDF5 store: records → replay → features → store.

Work is cut into record files (one task on one device). Each file is featurized as a
whole by a worker and saved as an atomic part under ``OUT.parts/``; a run that is killed
resumes with the files whose part is missing, and the store is assembled from the parts in
file order, so it has the same content however the run was cut or parallelised.
``--shard i/N`` keeps the files whose index is ``i`` mod ``N``; shards merge into one store.
"""

from __future__ import annotations

import multiprocessing as mp
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from .store.parts import check_manifest, done_indices, part_path, read_part, write_part
from .store.schema import UnitFeatures
from .store.writer import write_store
from .tenset.dataset import UNMEASURED, DatasetLayout, TaskIndex, discover, load_task_index
from .tenset.records import BadLine, Record, read_records
from .tenset.labels import mean_costs, task_labels
from .tenset.step_vectors import MAX_STEPS, STEP_DIM, step_vectors


@dataclass(frozen=True)
class FeaturizeSettings:
    dataset: str
    device: Optional[str] = None  # only measure_records/<device>/
    include_unmeasured: bool = False
    gpu: str = "k80"  # device constants of the analytic draft score for cuda records
    cpu: str = "epyc-7452"  # and for llvm records
    shard: tuple[int, int] = (0, 1)

    def manifest(self, files: list[str]) -> dict:
        from .features import FEATURE_SCHEMA_VERSION

        d = asdict(self)
        d.pop("shard")  # parts of different shards never share a directory
        return {**d, "feature_schema": str(FEATURE_SCHEMA_VERSION), "files": files}


@dataclass
class FeaturizeReport:
    records: int = 0
    replayed: int = 0
    failed: int = 0
    failure_reasons: dict[str, int] = field(default_factory=dict)
    bad_lines: int = 0
    seconds: float = 0.0
    processed: int = 0  # records featurized by this run (fewer than ``records`` when resuming)

    @property
    def records_per_second(self) -> float:
        return self.processed / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict:
        return {"records": self.records, "replayed": self.replayed, "failed": self.failed,
                "failure_reasons": self.failure_reasons, "bad_lines": self.bad_lines,
                "seconds": round(self.seconds, 3), "records_per_second": round(self.records_per_second, 2),
                "processed": self.processed}


@dataclass(frozen=True)
class _Unit:
    index: int  # position in the dataset's full file list: fixes the store's order
    device: str
    path: Path


def plan_units(layout: DatasetLayout, settings: FeaturizeSettings) -> list[_Unit]:
    files = [(dev, p) for dev, p in layout.record_files(settings.device)]
    if settings.include_unmeasured:
        files += [(UNMEASURED, p) for p in layout.unmeasured_files()]
    i, n = settings.shard
    return [_Unit(k, dev, p) for k, (dev, p) in enumerate(files) if k % n == i]


@lru_cache(maxsize=2)
def _task_index(root: str) -> TaskIndex:
    # Once per worker process: task pickles are read and decoded once, not per file.
    return load_task_index(discover(root))


def reason_category(reason: str) -> str:
    """``"compute_at: loop not found"`` -> ``"compute_at"``: failures are counted by category."""
    return reason.split(": ", 1)[0].strip() or "unknown"


def featurize_unit(settings: FeaturizeSettings, unit: _Unit) -> UnitFeatures:
    """Replay and featurize every record of one file; a failing record is kept as a reason."""
    from .features import featurize_prim_func
    from .replay import replay_record

    root = Path(settings.dataset)
    records: list[Record] = []
    failures: list[tuple[int, str]] = []
    for item in read_records(unit.path):
        if isinstance(item, BadLine):
            failures.append((item.source.line, f"unreadable line: {item.reason}"))
        else:
            records.append(item)
    cost = mean_costs([r.costs for r in records])
    if unit.device == UNMEASURED:
        labels = np.full(len(records), np.nan)
    else:
        labels = task_labels(cost, np.array([r.ok for r in records], dtype=bool))
    task = None
    if records:
        r0 = records[0]
        task = _task_index(settings.dataset).tasks.get((r0.workload_key.text, r0.target_kind))
    rows: dict[str, list] = {k: [] for k in ("line", "position", "label", "cost", "error_no", "stmt_count",
                                             "draft_score", "statements", "symbols", "dataflow", "steps")}
    for pos, rec in enumerate(records):
        if task is None:
            failures.append((rec.source.line, "unknown task: no task pickle has this workload key"))
            continue
        replayed = replay_record(task, rec)
        if not replayed.ok:
            failures.append((rec.source.line, f"{replayed.reason}: {replayed.detail}"))
            continue
        try:
            feats = featurize_prim_func(replayed.mod["main"], rec.target_kind,
                                        device=settings.gpu if rec.target_kind == "cuda" else settings.cpu)
        except Exception as exc:  # noqa: BLE001 - one program's failure must not end the run
            failures.append((rec.source.line, f"features: {type(exc).__name__}: {exc}"))
            continue
        for k, v in (("line", rec.source.line), ("position", pos), ("label", labels[pos]),
                     ("cost", cost[pos]), ("error_no", rec.error_no), ("stmt_count", len(feats.statements)),
                     ("draft_score", feats.draft_score), ("statements", feats.statements),
                     ("symbols", feats.symbols), ("dataflow", feats.dataflow),
                     ("steps", step_vectors(rec.raw_steps))):
            rows[k].append(v)
    arrays = {k: np.asarray(rows[k]) for k in ("line", "position", "label", "cost", "error_no", "stmt_count",
                                               "draft_score")}
    arrays["statements"] = np.concatenate(rows["statements"]) if rows["statements"] else np.zeros((0, 1), np.float32)
    arrays["symbols"] = np.concatenate(rows["symbols"]) if rows["symbols"] else np.zeros((0, 11), np.float32)
    arrays["dataflow"] = np.stack(rows["dataflow"]) if rows["dataflow"] else np.zeros((0, 8, 23), np.float32)
    arrays["steps"] = np.stack(rows["steps"]) if rows["steps"] else np.zeros((0, MAX_STEPS, STEP_DIM), np.float32)
    rel = str(unit.path.relative_to(root)) if unit.path.is_relative_to(root) else str(unit.path)
    key, kind = (records[0].workload_key.text, records[0].target_kind) if records else ("", "")
    return UnitFeatures(rel, unit.device, key, kind, arrays, failures, len(records))


def _work(args: tuple[FeaturizeSettings, _Unit, Path]) -> tuple[int, int, int]:
    settings, unit, parts = args
    feats = featurize_unit(settings, unit)
    write_part(parts, unit.index, feats)
    return unit.index, feats.records_read, len(feats.arrays["line"])


def run_featurize(settings: FeaturizeSettings, out: Path, jobs: int = 1,
                  on_progress: Optional[Callable[[int, int], None]] = None) -> FeaturizeReport:
    """Featurize into ``out``. ``on_progress(records_done, files_done)`` is called per file."""
    start = time.perf_counter()
    layout = discover(settings.dataset)
    units = plan_units(layout, settings)
    parts = out.with_name(out.name + ".parts")
    check_manifest(parts, settings.manifest([str(u.path.relative_to(layout.root)) for u in units]))
    done = done_indices(parts)
    todo = [u for u in units if u.index not in done]
    for u in units:
        if u.index in done and on_progress:
            on_progress(read_part(part_path(parts, u.index)).records_read, 1)
    tasks = ((settings, u, parts) for u in todo)
    processed = 0
    if jobs > 1 and len(todo) > 1:
        # spawn, not fork: TVM's runtime threads do not survive a fork
        with mp.get_context("spawn").Pool(jobs) as pool:
            for _, n_read, _ in pool.imap_unordered(_work, tasks):
                processed += n_read
                if on_progress:
                    on_progress(n_read, 1)
    else:
        for t in tasks:
            _, n_read, _ = _work(t)
            processed += n_read
            if on_progress:
                on_progress(n_read, 1)
    index = _task_index(settings.dataset)
    networks: dict[str, dict[str, int]] = {}
    for net in index.networks:
        for t, w in zip(net.tasks, net.weights):
            networks.setdefault(f"{t.workload_key}|{t.target_kind}", {})[net.name] = w
    unit_feats = [(u.index, read_part(part_path(parts, u.index))) for u in units]
    meta = {"feature_schema": settings.manifest([])["feature_schema"], "dataset": settings.dataset,
            "settings": {k: v for k, v in asdict(settings).items() if k != "shard"},
            "shard": f"{settings.shard[0]}/{settings.shard[1]}"}
    write_store(out, unit_feats, meta, networks)
    shutil.rmtree(parts)
    report = FeaturizeReport()
    reasons: Counter = Counter()
    for _, u in unit_feats:
        report.records += u.records_read
        report.replayed += len(u.arrays["line"])
        for _, reason in u.failures:
            if reason.startswith("unreadable line"):
                report.bad_lines += 1
            else:
                report.failed += 1
                reasons[reason_category(reason)] += 1
    report.failure_reasons = dict(reasons.most_common())
    report.processed = processed
    report.seconds = time.perf_counter() - start
    return report
