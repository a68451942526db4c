"""What earlier runs left in a work directory, so that running the same command again continues.

MetaSchedule appends every measured batch to the work directory's database as it goes. Run again
on that directory, its search starts from those programs (the population is seeded with the best
measured ones, and none is measured twice), but its trial budget starts from zero, the cost model
has seen nothing, and the best program found before is left out of what the run reports. A run
killed while appending leaves a last line cut short, on which MetaSchedule's loader fails with
"Unexpected EOF" and no file named.

Here ``--trials`` is the budget of the work directory: a rerun measures only what is left of it,
the cost model first learns the programs measured before (one update, as after a measured batch),
and the report counts them and their best. A last line cut short (no newline after it, not whole
JSON) is dropped: it is a record or workload whose write never finished. Any other bad line is
refused, naming it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.runner import RunnerResult
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate

from ...errors import BadInput
from ...sources.base import BadLine
from ...sources.metaschedule import RECORD_FILE, WORKLOAD_FILE, parse_ms_lines
from ...tenset.labels import FAILED_COST
from ...measure.outcome import measured_seconds


@dataclass(frozen=True)
class PastTrials:
    """The records an earlier run of a work directory measured for one task."""

    records: tuple[ms.database.TuningRecord, ...] = ()

    @property
    def trials(self) -> int:
        return len(self.records)

    @property
    def best_s(self) -> float:
        """The fastest among them, as the run's own batches are timed (measured_seconds);
        infinite when none ran."""
        return min((measured_seconds(_result(r)) for r in self.records), default=float("inf"))


def _result(record: ms.database.TuningRecord) -> RunnerResult:
    """A record's run as the runner reported it; MetaSchedule stores a failed one as a run time
    of 1e10, which comes back as a failed run."""
    secs = [float(s) for s in record.run_secs or ()]
    if secs and all(0 < t < FAILED_COST for t in secs):
        return RunnerResult(run_secs=record.run_secs, error_msg=None)
    return RunnerResult(run_secs=None, error_msg="failed in an earlier run of this work directory")


def whole_lines(path: Path, notes: list[str]) -> list[bytes]:
    """The file's lines, the last dropped from the file (and a note of it added) where its write
    never finished: no newline after it and not whole JSON."""
    with open(path, "rb") as f:
        lines = f.readlines()
    if not lines or lines[-1].endswith(b"\n"):
        return lines
    try:
        json.loads(lines[-1])
        return lines
    except ValueError:
        pass
    os.truncate(path, sum(len(line) for line in lines[:-1]))
    notes.append(f"{path}:{len(lines)}: dropped a line cut short ({len(lines[-1])} bytes, no newline), "
                 "left by a run that was stopped while writing it")
    return lines[:-1]


def repair_database(work_dir: str | Path) -> list[str]:
    """Check a work directory's database before MetaSchedule loads it; drop a last line cut short
    (what was dropped is returned, one message a line) and refuse any other bad line with its
    file:line. A directory without a database is left as it is."""
    root = Path(work_dir)
    notes: list[str] = []
    workload_path, record_path = root / WORKLOAD_FILE, root / RECORD_FILE
    n_workloads = 0
    if workload_path.is_file():
        lines = whole_lines(workload_path, notes)
        for lineno, line in enumerate(lines, 1):
            try:
                if line.strip():
                    json.loads(line)
            except ValueError as exc:
                raise BadInput(f"{workload_path}:{lineno}: not a JSON workload: {str(exc)[:200]}") from None
        n_workloads = sum(1 for line in lines if line.strip())
    if record_path.is_file():
        lines = whole_lines(record_path, notes)
        bad = [item for item in parse_ms_lines(lines, str(record_path), n_workloads) if isinstance(item, BadLine)]
        if bad:
            more = f" (and {len(bad) - 1} more bad lines)" if len(bad) > 1 else ""
            raise BadInput(f"{bad[0]}{more}: MetaSchedule cannot load this work directory's database; "
                           "give another --work-dir, or remove the bad lines")
    return notes


def open_database(work_dir: str | Path) -> tuple[ms.database.JSONDatabase, list[str]]:
    """The work directory's database, repaired (repair_database, whose notes come with it) and
    loaded; a database MetaSchedule cannot load (a workload that is JSON but not an IRModule, say)
    is refused naming the directory, where MetaSchedule's loader said only what failed inside it."""
    notes = repair_database(work_dir)
    try:
        return ms.database.JSONDatabase(work_dir=str(work_dir)), notes
    except Exception as exc:  # noqa: BLE001 - the loader fails with C++ errors of any kind
        message = " ".join(str(exc).split())[-300:]
        raise BadInput(f"{work_dir}: MetaSchedule cannot load the database there ({type(exc).__name__}: "
                       f"{message}); give another --work-dir") from None


def past_trials(database: ms.database.Database, contexts: list[ms.TuneContext]) -> list[PastTrials]:
    """The records the database holds for each context's task (the same workload, by structure);
    the database's records are read once for all of them."""
    workloads = [database.commit_workload(c.mod) if database.has_workload(c.mod) else None for c in contexts]
    records = database.get_all_tuning_records() if any(w is not None for w in workloads) else []
    return [PastTrials(tuple(r for r in records if r.workload.same_as(w)) if w is not None else ())
            for w in workloads]


def learn_past(model: ms.cost_model.CostModel, context: ms.TuneContext, past: PastTrials) -> None:
    """Give the cost model the programs measured before, as MetaSchedule gives it a measured batch."""
    if not past.records:
        return
    candidates = []
    for record in past.records:
        sch = s_tir.Schedule(context.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        candidates.append(MeasureCandidate(sch, record.args_info))
    model.update(context, candidates, [_result(r) for r in past.records])
