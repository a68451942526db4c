"""A source featurized into one HDF5 store: programs → features → parts → store.

Any ``ProgramSource`` (sources/) will do; its work is cut into units (one task's programs).
Each unit is featurized as a whole by a worker and saved as an atomic part under
``OUT.parts/``; a run that is killed resumes with the units whose part is missing, and the
store is assembled from the parts in unit order, so it has the same content however the run
was cut or parallelised. ``--shard i/N`` keeps the units whose index is ``i`` mod ``N``;
shards merge into one store.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections import Counter
from itertools import islice
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional, Union

import numpy as np

from .errors import BadInput
from .features import EXTRACTABLE_SCHEMAS, FEATURE_SCHEMA_VERSION, DeviceConstants
from .executors import Executor, LocalExecutor
from .devices import device_for, device_to_json
from .sources import ProgramSource, SourceError, Unit, open_source
from .sources.base import SourceProgram
from .store.parts import check_manifest, done_indices, lazy_part, part_path, write_part
from .store.schema import UnitFeatures
from .store.writer import check_output, write_store
from .tenset.step_vectors import MAX_STEPS, STEP_DIM, step_vectors

if TYPE_CHECKING:  # features import TVM; the store's readers and writers do not need it
    from .features.extract import ProgramFeatures


def parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard takes i/N, e.g. 0/4, not {text!r}") from None
    if not 0 <= i < n:
        raise ValueError(f"--shard {text}: need 0 <= i < N")
    return i, n


@dataclass(frozen=True)
class FeaturizeSettings:
    dataset: str = field(metadata={"help": "a TenSet dataset or MetaSchedule database directory"})
    device: Optional[str] = field(default=None, metadata={"help": "only measure_records/DEVICE/"})
    include_unmeasured: bool = field(default=False, metadata={"help": "also to_measure_programs/ (labels NaN)"})
    gpu: Optional[str] = field(default=None, metadata={
        "help": "GPU constants of the analytic draft score of cuda programs (default: features.DEFAULT_DEVICE)"})
    cpu: Optional[str] = field(default=None, metadata={
        "help": "CPU constants of the draft score of llvm programs (default: features.DEFAULT_DEVICE)"})
    shard: tuple[int, int] = field(default=(0, 1), metadata={"help": "i/N: featurize every N-th unit",
                                                             "parse": parse_shard})
    feature_schema: int = field(default=FEATURE_SCHEMA_VERSION, metadata={
        "help": "the feature schema to extract: 3, per-store columns by the package's own extractor; 2, by "
                "MetaSchedule's PerStoreFeature (what models trained before schema 3 read)",
        "choices": EXTRACTABLE_SCHEMAS})

    def constants(self, target_kind: str) -> DeviceConstants:
        return device_for(target_kind, self.gpu if target_kind == "cuda" else self.cpu)

    def manifest(self, units: list[str]) -> dict:
        d = asdict(self)
        d.pop("shard")  # parts of different shards never share a directory
        return {**d, "feature_schema": str(self.feature_schema), "units": units}


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


def plan_units(source: ProgramSource, settings: FeaturizeSettings) -> list[Unit]:
    i, n = settings.shard
    return [u for u in source.units(settings.device, settings.include_unmeasured) if u.index % n == i]


def reason_category(reason: str) -> str:
    """``"compute_at: loop not found"`` -> ``"compute_at"``: failures are counted by category."""
    return reason.split(": ", 1)[0].strip() or "unknown"


def _featurized(programs: Iterable[SourceProgram], target_kind: str, device: Optional[DeviceConstants],
                schema: int, chunk: int = 64) -> Iterator[tuple[SourceProgram, Union[ProgramFeatures, str]]]:
    """(program, its features or why it has none), the programs replayed and extracted ``chunk`` at
    a time: one native extraction call per chunk, and at most a chunk of schedules held at once."""
    from .features.program import programs_features

    it = iter(programs)
    while batch := list(islice(it, chunk)):
        yield from zip(batch, programs_features(batch, target_kind, device, schema))


def featurize_unit(source: ProgramSource, settings: FeaturizeSettings, unit: Unit) -> UnitFeatures:
    """Featurize every program of one unit; a program that fails is kept as a reason."""
    got = source.programs(unit)
    failures = list(got.bad_lines)
    device = settings.constants(got.target_kind) if got.target_kind else None
    rows: dict[str, list] = {k: [] for k in ("line", "position", "label", "cost", "error_no", "stmt_count",
                                             "draft_score", "statements", "symbols", "dataflow", "steps")}
    for prog, feats in _featurized(got.programs, got.target_kind, device, settings.feature_schema):
        if isinstance(feats, str):
            failures.append((prog.line, feats))
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
    return UnitFeatures(unit.name, unit.device, got.task_key, got.target_kind, arrays, failures, got.records_read)


def _work(args: tuple[ProgramSource, FeaturizeSettings, Unit, Path]) -> tuple[int, int, int]:
    source, settings, unit, parts = args
    feats = featurize_unit(source, settings, unit)
    write_part(parts, unit.index, feats)
    return unit.index, feats.records_read, len(feats.arrays["line"])


def _check_storable(root: Path, name: str) -> None:
    """The store keeps paths and device names as UTF-8 text; a name of other bytes (Python holds
    them as lone surrogates) would stop the run when the store is written, after all the work."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(f"{root}: the name {name!r} is not UTF-8 text, which the feature store keeps names as; "
                       "rename it") from None


def run_featurize(settings: FeaturizeSettings, out: Path, jobs: int = 1,
                  on_progress: Optional[Callable[[int, int], None]] = None,
                  executor: Optional[Executor] = None) -> FeaturizeReport:
    """Featurize into ``out``. ``on_progress(records_done, files_done)`` is called per file. The
    units run on ``executor`` (default: ``jobs`` local processes)."""
    start = time.perf_counter()
    check_output(out)
    for kind, name in (("cuda", settings.gpu), ("llvm", settings.cpu)):
        if name is not None:
            settings.constants(kind)  # an unknown device fails here, not in every worker
    source = open_source(settings.dataset)
    units = plan_units(source, settings)
    for name in (str(source.root), *(u.name for u in units), *(u.device for u in units)):
        _check_storable(source.root, name)
    # a shard past the units (--shard 17/20 of 13 files) writes an empty store, which merges as
    # nothing: the batch job of that shard succeeds, and merge finds every i/N it expects
    if not units and not (settings.shard[1] > 1 and source.units(settings.device, settings.include_unmeasured)):
        raise SourceError(f"{source.root}: nothing to featurize"
                          + (f" measured on device {settings.device!r}" if settings.device else "")
                          + f" (devices: {', '.join(sorted({u.device for u in source.units()})) or 'none'})")
    parts = out.with_name(out.name + ".parts")
    check_manifest(parts, settings.manifest([u.name for u in units]))
    done = done_indices(parts)
    todo = [u for u in units if u.index not in done]
    for u in units:
        if u.index in done:
            n_read = lazy_part(part_path(parts, u.index)).header.records_read  # checks the part before new work
            if on_progress:
                on_progress(n_read, 1)
    processed = 0
    executor = executor or LocalExecutor(jobs)
    for _, n_read, _ in executor.map_unordered(_work, [(source, settings, u, parts) for u in todo]):
        processed += n_read
        if on_progress:
            on_progress(n_read, 1)
    unit_parts = [(u.index, lazy_part(part_path(parts, u.index))) for u in units]
    heads = [u.header for _, u in unit_parts]
    kinds = sorted({h.target_kind for h in heads if h.target_kind})
    meta = {"feature_schema": str(settings.feature_schema), "dataset": str(source.root), "source_kind": source.kind,
            "source_fingerprint": source.fingerprint(),
            "settings": {k: v for k, v in asdict(settings).items() if k != "shard"},
            "shard": f"{settings.shard[0]}/{settings.shard[1]}",
            # the constants for every kind: shards of one dataset must agree even if their kinds differ
            "devices": {kind: device_to_json(settings.constants(kind)) for kind in ("cuda", "llvm")},
            "target_kinds": kinds}
    write_store(out, unit_parts, meta, source.networks())
    shutil.rmtree(parts)
    report = FeaturizeReport()
    reasons: Counter = Counter()
    for u in heads:
        report.records += u.records_read
        report.replayed += u.n_records
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


def cached_store(settings: FeaturizeSettings, cache: Path, jobs: int = 1,
                 on_progress: Optional[Callable[[int, int], None]] = None) -> tuple[Path, Optional[FeaturizeReport]]:
    """The store of ``settings.dataset`` under ``cache``, featurized on first use: (path, report or None).

    The cache key is the source's content (paths, sizes, mtimes), the feature schema and the device
    constants, so two datasets of one name, an edited dataset or a newer schema never share an entry.
    """
    source = open_source(settings.dataset)
    key = hashlib.sha256(repr((source.kind, source.fingerprint(), settings.feature_schema,
                               settings.constants("cuda"), settings.constants("llvm"),
                               settings.device, settings.include_unmeasured)).encode()).hexdigest()[:12]
    store = cache / f"{source.root.name}-{key}.h5"
    if store.is_file():
        return store, None
    cache.mkdir(parents=True, exist_ok=True)
    return store, run_featurize(settings, store, jobs=jobs, on_progress=on_progress)
