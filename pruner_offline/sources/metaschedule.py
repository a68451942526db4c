"""MetaSchedule JSON databases as a program source: each trace applied to its workload.

A database is two JSON-lines files: ``database_workload.json`` (one ``[hash, base64 IRModule]``
per line) and ``database_tuning_record.json`` (``[workload_index, [trace, run_secs, target,
args_info]]`` per line). Lines are checked here before TVM sees them: TVM's own reader gives
up on the whole file at the first bad line, while a bad line here is reported as file:line and
the rest is read. A unit is one workload; the record file is read once per process.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator, Optional, Union

import numpy as np

from ..errors import BadInput
from ..tenset.labels import FAILED_COST, task_labels
from ..tenset.records import BadLine, SourceLine
from .base import (LiveProgram, ProgramSource, SourceProgram, TailedFile, TailedSource, Unit, UnitPrograms,
                   register_source)

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
# a database shipped compressed (datasets/cpu-collect) holds these files gzipped, named NAME.gz
GZIP_SUFFIX = ".gz"
# beside a database that `collect` made: its settings, machine and runs, each run with its tasks
COLLECTION_MANIFEST = "collect.json"
# Ansor's "runtime error": MetaSchedule records a failed run as missing or 1e10 run times
FAILED_ERROR_NO = 4


@dataclass(frozen=True)
class MSRecordLine:
    """One tuning record, checked but not yet given to TVM."""

    source: SourceLine
    workload: int  # line index (0-based) in the workload file
    run_secs: tuple[float, ...]
    target_kind: str
    raw: str  # the line as written, handed to TVM when the program is needed

    @property
    def cost(self) -> float:
        """Mean run time, as TenSet's labels use; records without a valid time count as failed."""
        ok = [s for s in self.run_secs if 0 < s < FAILED_COST]
        return float(np.mean(ok)) if ok else FAILED_COST

    @property
    def ok(self) -> bool:
        return self.cost < FAILED_COST


def database_file(root: Path, name: str) -> Path:
    """root/name, or root/name.gz where only the compressed file is there."""
    plain = root / name
    packed = root / (name + GZIP_SUFFIX)
    return packed if not plain.is_file() and packed.is_file() else plain


def open_database_file(root: Path, name: str) -> BinaryIO:
    path = database_file(root, name)
    return gzip.open(path, "rb") if path.suffix == GZIP_SUFFIX else open(path, "rb")


def is_metaschedule_database(path: Union[str, Path]) -> bool:
    p = Path(path)
    return database_file(p, WORKLOAD_FILE).is_file() and database_file(p, RECORD_FILE).is_file()


def _factors(value: object) -> bool:
    """A decision of positive integers (tile factors, which TVM divides by)."""
    return isinstance(value, list) and bool(value) and all(type(v) is int and v >= 1 for v in value)


def _check_trace(trace: object) -> None:
    """What TVM's trace replay trusts without checking: a decision it divides by, indexes with or
    dereferences (a tile factor of 0 stopped the process with SIGFPE, a null decision or attribute
    with SIGSEGV, before any Python error could be raised)."""
    if not (isinstance(trace, list) and len(trace) == 2 and all(isinstance(t, list) for t in trace)):
        raise ValueError("trace is not [instructions, decisions]")
    insts, decisions = trace
    for inst in insts:
        if not (isinstance(inst, list) and len(inst) == 4 and isinstance(inst[0], str)
                and all(isinstance(x, list) for x in inst[1:])):
            raise ValueError("an instruction is not [name, inputs, attributes, outputs]")
        if any(a is None for a in inst[2]):
            raise ValueError(f"{inst[0]}: a null attribute")
    for d in decisions:
        if not (isinstance(d, list) and len(d) == 2 and type(d[0]) is int and 0 <= d[0] < len(insts)):
            raise ValueError("a decision is not [instruction index, value]")
        name, attrs, value = insts[d[0]][0], insts[d[0]][2], d[1]
        if name == "SamplePerfectTile":
            if not (_factors(value) and (not attrs or len(value) == attrs[0])):
                raise ValueError(f"SamplePerfectTile: decision {str(value)[:80]} is not {attrs[:1]} factors >= 1")
        elif name == "SampleCategorical":
            n = len(attrs[0]) if attrs and isinstance(attrs[0], list) else 0
            if not (type(value) is int and 0 <= value < n):
                raise ValueError(f"SampleCategorical: decision {str(value)[:80]} is not an index below {n}")
        elif not (type(value) is int or _factors(value)):
            raise ValueError(f"{name}: decision {str(value)[:80]} is not an integer or positive integers")


def _check(obj: object) -> tuple[int, tuple[float, ...], str]:
    if not (isinstance(obj, list) and len(obj) == 2 and type(obj[0]) is int and isinstance(obj[1], list)
            and len(obj[1]) >= 3):
        raise ValueError("not [workload_index, [trace, run_secs, target, ...]]")
    trace, run_secs, target = obj[1][:3]
    _check_trace(trace)
    if run_secs is None:
        run_secs = []
    if not isinstance(run_secs, list) or any(type(s) not in (int, float) for s in run_secs):
        raise ValueError("run_secs is not a list of numbers")
    kind = target.get("kind") if isinstance(target, dict) else None
    if not isinstance(kind, str):
        raise ValueError("target has no kind")
    return obj[0], tuple(float(s) for s in run_secs), kind


def _workload_lines(root: Path) -> list[bytes]:
    with open_database_file(root, WORKLOAD_FILE) as f:
        return [line for line in f if line.strip()]


def _checked_workload_lines(root: Path) -> list[bytes]:
    """The workload lines; with none, every tuning record would be dropped, so that is refused."""
    lines = _workload_lines(root)
    if not lines:
        with open_database_file(root, RECORD_FILE) as f:
            if any(line.strip() for line in f):
                raise BadInput(f"{root / WORKLOAD_FILE}: holds no workloads, but {RECORD_FILE} has tuning records, "
                               "each naming a line of it")
    return lines


def parse_ms_lines(lines: Iterable[bytes], path: str, n_workloads: int,
                   first_line: int = 1) -> Iterator[Union[MSRecordLine, BadLine]]:
    """Check tuning-record lines (bytes); blank lines yield nothing."""
    for lineno, line in enumerate(lines, first_line):
        if not line.strip():
            continue
        source = SourceLine(path, lineno)
        try:
            workload, run_secs, kind = _check(json.loads(line))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: nested too deep
            yield BadLine(source, f"bad tuning record: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if not 0 <= workload < n_workloads:
            yield BadLine(source, f"workload index {workload} out of range (0..{n_workloads - 1})" if n_workloads
                          else f"workload index {workload}, but {WORKLOAD_FILE} holds no workload")
            continue
        yield MSRecordLine(source, workload, run_secs, kind, line.decode().strip())


def read_ms_records(root: Union[str, Path]) -> Iterator[Union[MSRecordLine, BadLine]]:
    """Stream the tuning records of a database directory."""
    root = Path(root)
    with open_database_file(root, RECORD_FILE) as f:
        yield from parse_ms_lines(f, str(database_file(root, RECORD_FILE)), len(_checked_workload_lines(root)))


@lru_cache(maxsize=2)
def _grouped(root: str, _stamp: tuple) -> tuple[dict[int, list[MSRecordLine]], list[BadLine], list[bytes]]:
    # One read of the database per process and content stamp, not one per workload: the records by
    # workload, the unreadable lines, and the workload lines.
    workload_lines = _checked_workload_lines(Path(root))
    by_workload: dict[int, list[MSRecordLine]] = {}
    bad: list[BadLine] = []
    with open_database_file(Path(root), RECORD_FILE) as f:
        for item in parse_ms_lines(f, str(database_file(Path(root), RECORD_FILE)), len(workload_lines)):
            if isinstance(item, BadLine):
                bad.append(item)
            else:
                by_workload.setdefault(item.workload, []).append(item)
    return by_workload, bad, workload_lines


def grouped_records(db: Path) -> tuple[dict[int, list[MSRecordLine]], list[BadLine], list[bytes]]:
    """``_grouped`` of the database ``db``, keyed by its files' sizes and times: read again only
    when a tuning run has appended to it."""
    files = (database_file(db, WORKLOAD_FILE), database_file(db, RECORD_FILE))
    return _grouped(str(db), tuple((p.stat().st_size, p.stat().st_mtime_ns) for p in files))


class _Workloads:
    """Workload modules by index, decoded by TVM on first use."""

    def __init__(self, lines: list[bytes]):
        self.lines = lines
        self.decoded: dict[int, object] = {}

    def get(self, index: int) -> object:
        from tvm.s_tir.meta_schedule.database import Workload

        if index not in self.decoded:
            self.decoded[index] = Workload.from_json(json.loads(self.lines[index]))
        return self.decoded[index]

    def hash(self, index: int) -> str:
        """The structural hash MetaSchedule keys the workload by."""
        try:
            return str(json.loads(self.lines[index])[0])
        except (IndexError, ValueError, KeyError, TypeError, RecursionError):
            return f"workload{index}"


def scheduled_func(workloads: _Workloads, rec: MSRecordLine) -> tuple[Optional[object], str]:
    """(the Schedule holding the scheduled PrimFunc, "") or (None, reason). Each record is rebuilt from its own line: TVM's
    JSONDatabase hands records back sorted by run time, which would pair programs with wrong costs."""
    from tvm import s_tir
    from tvm.s_tir.meta_schedule.database import TuningRecord

    try:
        tvm_rec = TuningRecord.from_json(json.loads(rec.raw)[1], workloads.get(rec.workload))
        sch = s_tir.Schedule(tvm_rec.workload.mod, debug_mask=0)
        tvm_rec.trace.apply_to_schedule(sch, remove_postproc=False)
        return sch, ""
    except Exception as exc:  # noqa: BLE001 - one bad trace or workload must not end the run
        return None, f"trace: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def _program(workloads: _Workloads, rec: MSRecordLine, position: int, label: float) -> SourceProgram:
    func, reason = scheduled_func(workloads, rec)
    return SourceProgram(rec.source.line, position, rec.cost, 0 if rec.ok else FAILED_ERROR_NO, label, func, reason)


@register_source
class MetaScheduleSource(ProgramSource):
    kind = "metaschedule"

    @classmethod
    def detect(cls, path: Path) -> bool:
        return is_metaschedule_database(path)

    def files(self) -> list[Path]:
        return [database_file(self.root, WORKLOAD_FILE), database_file(self.root, RECORD_FILE)]

    def networks(self) -> dict[str, dict[str, int]]:
        """A collection's tasks by the network each came from (collect.json: runs[].tasks), so that
        stores of it split by network (holdout:NET); a network file is named by its stem."""
        path = self.root / COLLECTION_MANIFEST
        if not path.is_file():
            return {}
        try:
            manifest = json.loads(path.read_text())
            kind = manifest["settings"]["target_kind"]
            tasks = [t for run in manifest["runs"] for t in run.get("tasks", [])]
            out: dict[str, dict[str, int]] = {}
            for t in tasks:
                origin = str(t["origin"])
                network = Path(origin).stem if origin.endswith((".pt2", ".onnx")) else origin
                out.setdefault(f"ms:{t['workload']}|{kind}", {})[network] = int(t["weight"])
            return out
        except (ValueError, KeyError, TypeError) as exc:
            raise BadInput(f"{path}: not a collection manifest ({type(exc).__name__}: {exc})") from None

    def units(self, device: Optional[str] = None, include_unmeasured: bool = False) -> list[Unit]:
        if device is not None and device != self.root.name:
            return []
        return [Unit(k, self.root.name, f"{RECORD_FILE}#workload={k}")
                for k in range(len(_checked_workload_lines(self.root)))]

    def programs(self, unit: Unit) -> UnitPrograms:
        by_workload, bad, workload_lines = grouped_records(self.root)
        records = by_workload.get(unit.index, [])
        # every unit shares one record file: the first unit reports its unreadable lines
        bad_lines = [(b.source.line, f"unreadable line: {b.reason}") for b in bad] if unit.index == 0 else []
        workloads = _Workloads(workload_lines)
        labels = task_labels(np.array([r.cost for r in records]), np.array([r.ok for r in records], dtype=bool))
        programs = (_program(workloads, rec, pos, float(labels[pos])) for pos, rec in enumerate(records))
        kind = records[0].target_kind if records else ""
        return UnitPrograms(f"ms:{workloads.hash(unit.index)}", kind, programs, len(records), bad_lines)


class MetaScheduleLog(TailedSource):
    """The database a running ``tune_tir``/``tune_relax`` (or ``pruner-train tune``) appends to."""

    def __init__(self, root: Union[str, Path]):
        self.root = Path(root)
        if not (self.root / WORKLOAD_FILE).is_file():
            raise FileNotFoundError(f"{self.root}: no {WORKLOAD_FILE}; is this the work directory of a tuning run?")
        self.tail = TailedFile(self.root / RECORD_FILE)
        self.workloads = _Workloads(_workload_lines(self.root))

    def poll(self) -> list[Union[LiveProgram, BadLine]]:
        lines = self.tail.poll()
        if lines:
            self.workloads.lines = _workload_lines(self.root)  # records may name workloads added since
        out: list[Union[LiveProgram, BadLine]] = []
        first = self.tail.lines_read - len(lines) + 1
        for item in parse_ms_lines(lines, str(self.tail.path), len(self.workloads.lines), first):
            if isinstance(item, BadLine):
                out.append(item)
            else:
                prog = _program(self.workloads, item, 0, float("nan"))
                out.append(LiveProgram(f"ms:{self.workloads.hash(item.workload)}", item.target_kind, prog))
        return out


@dataclass
class DatabaseSummary:
    """What ``pruner-train info`` says of a MetaSchedule database (no TVM needed)."""

    root: str
    workloads: int
    records: int
    failed_records: int
    records_by_workload: dict[int, int]
    targets: dict[str, int]
    bad_lines: int
    bad_line_examples: list[str]

    def to_json(self) -> dict:
        return {"root": self.root, "source": MetaScheduleSource.kind, "workloads": self.workloads,
                "records": self.records, "failed_records": self.failed_records,
                "records_by_workload": {str(k): v for k, v in sorted(self.records_by_workload.items())},
                "targets": self.targets, "bad_lines": self.bad_lines, "bad_line_examples": self.bad_line_examples}


def summarize_database(root: Union[str, Path], max_examples: int = 20) -> DatabaseSummary:
    root = Path(root)
    by_workload: dict[int, int] = {}
    targets: dict[str, int] = {}
    failed = bad = 0
    examples: list[str] = []
    for item in read_ms_records(root):
        if isinstance(item, BadLine):
            bad += 1
            if len(examples) < max_examples:
                examples.append(str(item))
            continue
        by_workload[item.workload] = by_workload.get(item.workload, 0) + 1
        targets[item.target_kind] = targets.get(item.target_kind, 0) + 1
        failed += not item.ok
    return DatabaseSummary(str(root), len(_workload_lines(root)), sum(by_workload.values()), failed, by_workload,
                           targets, bad, examples)
