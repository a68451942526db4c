"""MetaSchedule JSON databases as a source of measured programs: trace → scheduled TIR.

A database is two JSON-lines files: ``database_workload.json`` (one ``[hash, base64 IRModule]``
per line) and ``database_tuning_record.json`` (``[workload_index, [trace, run_secs, target,
args_info]]`` per line). Lines are checked here before TVM sees them: TVM's own reader gives
up on the whole file at the first bad line, while a bad line here is reported as file:line and
the rest is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Union

import numpy as np

from ..errors import BadInput
from ..tenset.labels import FAILED_COST
from ..tenset.records import BadLine, SourceLine

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


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
        """Median run time; records without a valid time count as failed."""
        ok = [s for s in self.run_secs if 0 < s < FAILED_COST]
        return float(np.median(ok)) if ok else FAILED_COST

    @property
    def ok(self) -> bool:
        return self.cost < FAILED_COST


def is_metaschedule_database(path: Union[str, Path]) -> bool:
    p = Path(path)
    return (p / WORKLOAD_FILE).is_file() and (p / RECORD_FILE).is_file()


def _check(obj: object) -> tuple[int, tuple[float, ...], str]:
    if not (isinstance(obj, list) and len(obj) == 2 and type(obj[0]) is int and isinstance(obj[1], list)
            and len(obj[1]) >= 3):
        raise ValueError("not [workload_index, [trace, run_secs, target, ...]]")
    trace, run_secs, target = obj[1][:3]
    if not isinstance(trace, list):
        raise ValueError("trace is not a list")
    if run_secs is None:
        run_secs = []
    if not isinstance(run_secs, list) or any(type(s) not in (int, float) for s in run_secs):
        raise ValueError("run_secs is not a list of numbers")
    kind = target.get("kind") if isinstance(target, dict) else None
    if not isinstance(kind, str):
        raise ValueError("target has no kind")
    return obj[0], tuple(float(s) for s in run_secs), kind


def workload_count(root: Union[str, Path]) -> int:
    """Workloads of a database; with none, its tuning records would all be dropped, so that is refused."""
    root = Path(root)
    with open(root / WORKLOAD_FILE, "rb") as f:
        n = sum(1 for line in f if line.strip())
    with open(root / RECORD_FILE, "rb") as f:
        if n == 0 and any(line.strip() for line in f):
            raise BadInput(f"{root / WORKLOAD_FILE}: holds no workloads, but {RECORD_FILE} has tuning records, "
                           "each naming a line of it")
    return n


def read_ms_records(root: Union[str, Path], start_line: int = 1) -> Iterator[Union[MSRecordLine, BadLine]]:
    """Stream the tuning records of a database directory, from 1-based ``start_line`` on."""
    root = Path(root)
    n_workloads = workload_count(root)
    path = str(root / RECORD_FILE)
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            if lineno < start_line or not line.strip():
                continue
            source = SourceLine(path, lineno)
            try:
                workload, run_secs, kind = _check(json.loads(line))
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: nested too deep
                yield BadLine(source, f"bad tuning record: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            if not 0 <= workload < n_workloads:
                yield BadLine(source, f"workload index {workload} out of range (0..{n_workloads - 1})")
                continue
            yield MSRecordLine(source, workload, run_secs, kind, line.decode().strip())


def workload_hash(root: Union[str, Path], index: int) -> str:
    """The structural hash MetaSchedule keys a workload by (line ``index`` of the workload file)."""
    lines = [line for line in open(Path(root) / WORKLOAD_FILE, "rb") if line.strip()]
    try:
        return str(json.loads(lines[index])[0])
    except (IndexError, ValueError, KeyError, TypeError, RecursionError):
        return f"workload{index}"


def scheduled_funcs(root: Union[str, Path], records: list[MSRecordLine]) -> list[tuple[MSRecordLine, Optional[object], str]]:
    """(record, scheduled PrimFunc or None, failure reason) for each record, in the given order.

    Records are rebuilt one by one from their own lines: TVM's JSONDatabase hands its records
    back sorted by run time, which would pair programs with the wrong costs.
    """
    from tvm import s_tir
    from tvm.s_tir.meta_schedule.database import TuningRecord, Workload

    workload_lines = [line for line in open(Path(root) / WORKLOAD_FILE, "rb") if line.strip()]
    workloads: dict[int, object] = {}
    out: list[tuple[MSRecordLine, Optional[object], str]] = []
    for rec in records:
        try:
            if rec.workload not in workloads:
                workloads[rec.workload] = Workload.from_json(json.loads(workload_lines[rec.workload]))
            tvm_rec = TuningRecord.from_json(json.loads(rec.raw)[1], workloads[rec.workload])
            sch = s_tir.Schedule(tvm_rec.workload.mod)
            tvm_rec.trace.apply_to_schedule(sch, remove_postproc=False)
            out.append((rec, sch.mod["main"], ""))
        except Exception as exc:  # noqa: BLE001 - one bad trace or workload must not end the run
            out.append((rec, None, f"trace: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"))
    return out
