"""Featurize a dataset into one HDF5 store: records → replay → features → store.

Sources: a TenSet dataset (Ansor records replayed on TIR) or a MetaSchedule JSON database
(traces applied to their workloads); both give scheduled TIR, featurized the same way.

Work is cut into units: record files (one task on one device), or workloads of a database.
Each unit is featurized as a whole by a worker and saved as an atomic part under
``OUT.parts/``; a run that is killed resumes with the units whose part is missing, and the
store is assembled from the parts in unit order, so it has the same content however the run
was cut or parallelised. ``--shard i/N`` keeps the units whose index is ``i`` mod ``N``;
shards merge into one store.
"""

from __future__ import annotations

import multiprocessing as mp
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Optional

import numpy as np

from .replay.metaschedule import (RECORD_FILE, is_metaschedule_database, read_ms_records, scheduled_funcs,
                                  workload_count, workload_hash)
from .store.parts import check_manifest, done_indices, part_path, read_part, write_part
from .store.schema import UnitFeatures
from .store.writer import check_output, write_store
from .tenset.dataset import UNMEASURED, TaskIndex, discover, file_task_key, load_task_index
from .tenset.labels import cost_problem, mean_costs, task_labels
from .tenset.records import BadLine, Record, read_records
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
    examples: list[str] = field(default_factory=list)  # where: "file:line: reason" of the first failures
    seconds: float = 0.0
    processed: int = 0  # records featurized by this run (fewer than ``records`` when resuming)

    @property
    def records_per_second(self) -> float:
        return self.processed / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict:
        return {"records": self.records, "replayed": self.replayed, "failed": self.failed,
                "failure_reasons": self.failure_reasons, "bad_lines": self.bad_lines, "examples": self.examples,
                "seconds": round(self.seconds, 3), "records_per_second": round(self.records_per_second, 2),
                "processed": self.processed}


@dataclass(frozen=True)
class _Unit:
    index: int  # position in the dataset's full list of units: fixes the store's order
    device: str
    path: Path  # the record file
    workload: Optional[int] = None  # MetaSchedule databases: the workload this unit covers


@dataclass
class _Program:
    """A measured (or sampled) program from any source, before featurization."""

    line: int
    position: int  # among the unit's records, in file order
    cost: float
    error_no: int
    label: float
    func: object  # scheduled tvm PrimFunc, or None when it could not be made
    reason: str  # why func is None
    raw_steps: tuple = ()  # Ansor steps (TenSet) for the TLP vectors; none for MetaSchedule


@dataclass
class _UnitPrograms:
    key: str
    target_kind: str
    programs: Iterable[_Program]  # the TenSet source replays lazily, one record at a time
    records_read: int
    bad_lines: list[tuple[int, str]]


def plan_units(root: Path, settings: FeaturizeSettings) -> list[_Unit]:
    """Units of work: record files of a TenSet dataset, or workloads of a MetaSchedule database."""
    if is_metaschedule_database(root):
        n = workload_count(root)
        units = [_Unit(k, root.name, root / RECORD_FILE, k) for k in range(n)]
    else:
        layout = discover(root)
        files = [(dev, p) for dev, p in layout.record_files(settings.device)]
        if settings.include_unmeasured:
            files += [(UNMEASURED, p) for p in layout.unmeasured_files()]
        units = [_Unit(k, dev, p) for k, (dev, p) in enumerate(files)]
    i, n = settings.shard
    return [u for u in units if u.index % n == i]


@lru_cache(maxsize=2)
def _task_index(root: str) -> TaskIndex:
    # Once per worker process: task pickles are read and decoded once, not per file.
    return load_task_index(discover(root))


def reason_category(reason: str) -> str:
    """``"compute_at: loop not found"`` -> ``"compute_at"``: failures are counted by category."""
    return reason.split(": ", 1)[0].strip() or "unknown"


def _tenset_programs(settings: FeaturizeSettings, unit: _Unit) -> _UnitPrograms:
    from .replay import replay_record

    records: list[Record] = []
    bad: list[tuple[int, str]] = []
    for item in read_records(unit.path):
        if isinstance(item, BadLine):
            bad.append((item.source.line, f"unreadable line: {item.reason}"))
        else:
            records.append(item)
    key = file_task_key(records)
    measured = unit.device != UNMEASURED
    problems = [cost_problem(r.costs, r.error_no) if measured else None for r in records]
    own = np.array([(r.workload_key.text, r.target_kind) == key for r in records], dtype=bool)
    usable = own & np.array([p is None for p in problems], dtype=bool)
    cost = mean_costs([r.costs for r in records])
    labels = (task_labels(cost, usable & np.array([r.ok for r in records], dtype=bool)) if measured
              else np.full(len(records), np.nan))
    task = _task_index(settings.dataset).tasks.get(key) if key else None

    def program(pos: int, rec: Record) -> _Program:
        if task is None:
            func, reason = None, "unknown task: no task pickle has this workload key"
        elif not own[pos]:
            func, reason = None, f"other task: workload key {rec.workload_key.text} is not the file's {key[0]}"
        elif problems[pos]:
            func, reason = None, problems[pos]
        else:
            replayed = replay_record(task, rec)
            func = replayed.mod["main"] if replayed.ok else None
            reason = "" if replayed.ok else f"{replayed.reason}: {replayed.detail}"
        return _Program(rec.source.line, pos, float(cost[pos]), rec.error_no, float(labels[pos]), func, reason,
                        rec.raw_steps)

    # programs are made lazily, so ``program`` must still see ``key`` as it is now
    return _UnitPrograms(*(key or ("", "")), (program(i, r) for i, r in enumerate(records)), len(records), bad)


def _metaschedule_programs(settings: FeaturizeSettings, unit: _Unit) -> _UnitPrograms:
    root = unit.path.parent
    records, bad = [], []
    for item in read_ms_records(root):
        if isinstance(item, BadLine):
            if unit.workload == 0:  # every unit reads the whole file; one of them reports its bad lines
                bad.append((item.source.line, f"unreadable line: {item.reason}"))
        elif item.workload == unit.workload:
            records.append(item)
    cost = np.array([r.cost for r in records])
    labels = task_labels(cost, np.array([r.ok for r in records], dtype=bool))
    programs = [_Program(rec.source.line, pos, float(cost[pos]), 0 if rec.ok else 4, float(labels[pos]), func, reason)
                for pos, (rec, func, reason) in enumerate(scheduled_funcs(root, records))]
    kind = records[0].target_kind if records else ""
    return _UnitPrograms(f"ms:{workload_hash(root, unit.workload)}", kind, programs, len(records), bad)


def featurize_unit(settings: FeaturizeSettings, unit: _Unit) -> UnitFeatures:
    """Featurize every program of one unit; a program that fails is kept as a reason."""
    from .features import featurize_prim_func

    source = _tenset_programs if unit.workload is None else _metaschedule_programs
    got = source(settings, unit)
    failures = list(got.bad_lines)
    device = settings.gpu if got.target_kind == "cuda" else settings.cpu
    rows: dict[str, list] = {k: [] for k in ("line", "position", "label", "cost", "error_no", "stmt_count",
                                             "draft_score", "statements", "symbols", "dataflow", "steps")}
    for prog in got.programs:
        if prog.func is None:
            failures.append((prog.line, prog.reason))
            continue
        try:
            feats = featurize_prim_func(prog.func, got.target_kind, device=device)
        except Exception as exc:  # noqa: BLE001 - one program's failure must not end the run
            failures.append((prog.line, f"features: {type(exc).__name__}: {exc}"))
            continue
        if not all(np.isfinite(x).all() for x in (feats.statements, feats.symbols, feats.dataflow, feats.draft_score)):
            failures.append((prog.line, "features: not finite (NaN or infinite values)"))
            continue
        for k, v in (("line", prog.line), ("position", prog.position), ("label", prog.label),
                     ("cost", prog.cost), ("error_no", prog.error_no), ("stmt_count", len(feats.statements)),
                     ("draft_score", feats.draft_score), ("statements", feats.statements),
                     ("symbols", feats.symbols), ("dataflow", feats.dataflow),
                     ("steps", step_vectors(prog.raw_steps))):
            rows[k].append(v)
    arrays = {k: np.asarray(rows[k]) for k in ("line", "position", "label", "cost", "error_no", "stmt_count",
                                               "draft_score")}
    arrays["statements"] = np.concatenate(rows["statements"]) if rows["statements"] else np.zeros((0, 1), np.float32)
    arrays["symbols"] = np.concatenate(rows["symbols"]) if rows["symbols"] else np.zeros((0, 11), np.float32)
    arrays["dataflow"] = np.stack(rows["dataflow"]) if rows["dataflow"] else np.zeros((0, 8, 23), np.float32)
    arrays["steps"] = np.stack(rows["steps"]) if rows["steps"] else np.zeros((0, MAX_STEPS, STEP_DIM), np.float32)
    root = Path(settings.dataset)
    rel = str(unit.path.relative_to(root)) if unit.path.is_relative_to(root) else str(unit.path)
    if unit.workload is not None:
        rel += f"#workload={unit.workload}"
    return UnitFeatures(rel, unit.device, got.key, got.target_kind, arrays, failures, got.records_read)


def _work(args: tuple[FeaturizeSettings, _Unit, Path]) -> tuple[int, int, int]:
    settings, unit, parts = args
    feats = featurize_unit(settings, unit)
    write_part(parts, unit.index, feats)
    return unit.index, feats.records_read, len(feats.arrays["line"])


def run_featurize(settings: FeaturizeSettings, out: Path, jobs: int = 1,
                  on_progress: Optional[Callable[[int, int], None]] = None) -> FeaturizeReport:
    """Featurize into ``out``. ``on_progress(records_done, files_done)`` is called per file."""
    from .features import get_device

    start = time.perf_counter()
    root = Path(settings.dataset)
    check_output(out)
    for device in (settings.gpu, settings.cpu):
        get_device(device)  # an unknown name would fail every record, one by one
    units = plan_units(root, settings)
    parts = out.with_name(out.name + ".parts")
    check_manifest(parts, settings.manifest([f"{u.path.relative_to(root)}#{u.workload}" for u in units]))
    done = done_indices(parts)
    todo = [u for u in units if u.index not in done]
    for u in units:
        if u.index in done:
            n_read = read_part(part_path(parts, u.index)).records_read  # checks the part before new work
            if on_progress:
                on_progress(n_read, 1)
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
    networks: dict[str, dict[str, int]] = {}
    if not is_metaschedule_database(root):
        for net in _task_index(settings.dataset).networks:
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
        report.examples += [f"{u.file}:{line}: {reason}" for line, reason in u.failures[:20 - len(report.examples)]]
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
