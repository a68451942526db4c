"""The collect driver: for each task, sample programs (sampler.py), build them, measure them, and
append them to the output's MetaSchedule database, until the task holds the requested number.

Resuming is the database itself: a rerun of the same command counts what each task holds and
measures only what is left, never a program it holds already (their structural hashes seed the
sampler). A batch is appended only once all of it is measured, one whole line a record, so a run
killed at any moment leaves whole records and at most a last line cut short, which the rerun drops
(tuning/run/resume.py) before it goes on. Programs that fail are records too (run time 1e10, as
MetaSchedule stores them), and why each failed goes to failures.jsonl beside the database.

Measurement on this machine waits for the builds to end (a CPU timed while programs compile beside
it is timed wrong); on a remote device the next batch is sampled and built while one is measured.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

import tvm
import tvm_ffi
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from ..errors import dumps
from ..measure.batch import MeasuredBatch
from ..measure.outcome import failure_reason
from ..measure.measurers import check_measurable, run_measurers
from ..targets import tuning_target
from ..tenset.labels import FAILED_COST
from ..tuning.run.resume import repair_database
from .manifest import record_run, start_run
from .sampler import TaskSampler, program_hash
from .settings import CollectSettings
from .tasks import CollectTask, unique_tasks

FAILURES = "failures.jsonl"
# batches in a row that found no new program before a task's space counts as exhausted
_DRY_BATCHES = 3


@dataclass(frozen=True)
class CollectReport:
    out: str
    tasks: int  # of this shard
    measured: int  # by this run
    failed: dict[str, int]  # by this run, by reason (measure/outcome.py)
    duplicates: int  # programs drawn again and not measured, by this run
    held: int  # records of this shard's tasks in the database now
    exhausted: dict[str, int]  # task -> programs held, where its space ran out before programs_per_task
    seconds: float
    programs_per_second: float
    shard: str = "0/1"
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return dumps(asdict(self), sort_keys=True)


def select_shard(tasks: list[CollectTask], index: int, count: int) -> list[CollectTask]:
    """The tasks of shard index/count: every count-th of all tasks in the order of their structural
    hash, so that every shard's command, given the same inputs, agrees on who takes which."""
    ordered = sorted(unique_tasks(tasks), key=lambda t: int(tvm_ffi.structural_hash(t.mod)))
    return ordered[index::count]


def _held_programs(database: ms.database.JSONDatabase) -> dict[int, list[ms.database.TuningRecord]]:
    """The database's records by the structural hash of their workload."""
    out: dict[int, list] = {}
    for record in database.get_all_tuning_records():
        out.setdefault(int(tvm_ffi.structural_hash(record.workload.mod)), []).append(record)
    return out


def _hashes(mod: tvm.IRModule, records: list) -> set[int]:
    out = set()
    for record in records:
        sch = s_tir.Schedule(mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        out.add(program_hash(sch))
    return out


@dataclass
class _Tally:
    measured: int = 0
    failed: Counter = field(default_factory=Counter)


class _Batch:
    """Candidates built and handed to the runner; ``finish`` waits for their runs and appends them."""

    def __init__(self, candidates, builder, runner, target):
        self.candidates = candidates
        self.measured = MeasuredBatch([c.sch.mod for c in candidates], [c.args_info for c in candidates],
                                      builder, runner, target)

    def finish(self, database, workload, target, task: str, failures, tally: _Tally) -> list:
        results = []
        for cand, (build_error, run) in zip(self.candidates, self.measured.results()):
            results.append(run)
            reason = failure_reason(build_error, run.error_msg)
            secs = [float(t) for t in run.run_secs] if reason is None else [FAILED_COST]
            database.commit_tuning_record(ms.database.TuningRecord(cand.sch.trace, workload, secs, target,
                                                                   cand.args_info))
            if reason is not None:
                tally.failed[reason] += 1
                failures.write(dumps({"task": task, "program": str(program_hash(cand.sch)), "reason": reason,
                                      "message": (build_error or run.error_msg or "")[-2000:]}) + "\n")
        failures.flush()
        tally.measured += len(self.candidates)
        return results


def collect(tasks: list[CollectTask], out: str | Path, s: CollectSettings, *,
            on_start: Optional[Callable[[int], None]] = None,
            on_measured: Optional[Callable[[int], None]] = None) -> CollectReport:
    """Measure s.programs_per_task programs of every task of s.shard into out's database.
    on_start(programs left in all) once, on_measured(n) after every batch appended."""
    out = Path(out)
    target = tuning_target(s.target_kind, s.num_cores, s.device)
    check_measurable(s.target_kind, s.measure, "collect")
    index, count = s.shard_of
    mine = select_shard(tasks, index, count)
    out.mkdir(parents=True, exist_ok=True)
    notes = repair_database(out)
    measured_on = (f"rpc {s.measure.rpc.tracker_host}:{s.measure.rpc.tracker_port} key {s.measure.rpc.key}"
                   if s.measure.rpc else "local")
    manifest = start_run(out, s, target, measured_on,
                         [{"name": t.name, "workload": str(tvm_ffi.structural_hash(t.mod)), "weight": t.weight,
                           "origin": t.origin} for t in mine])
    database = ms.database.JSONDatabase(work_dir=str(out))
    held = _held_programs(database)
    past = [held.get(int(tvm_ffi.structural_hash(t.mod)), []) for t in mine]
    if on_start:
        on_start(sum(max(s.programs_per_task - len(p), 0) for p in past))
    overlap = s.measure.rpc is not None
    tally, duplicates, exhausted = _Tally(), 0, {}
    start = time.perf_counter()
    try:
        with run_measurers(s.measure) as (builder, runner), open(out / FAILURES, "a") as failures:
            for k, (task, done) in enumerate(zip(mine, past)):
                left = s.programs_per_task - len(done)
                if left <= 0:
                    continue
                workload = database.commit_workload(task.mod)
                sampler = TaskSampler(task.mod, target, database, seed=s.seed + index + k * count,
                                      random_fraction=s.random_fraction, batch=s.batch_size,
                                      population_size=s.population_size, num_threads=s.num_cores,
                                      seen=_hashes(task.mod, done))
                inflight: Optional[_Batch] = None
                dry = 0
                while left > 0 or inflight is not None:
                    candidates = sampler.next_batch(min(s.batch_size, left)) if left > 0 else []
                    left -= len(candidates)
                    dry = 0 if candidates else dry + 1
                    if left > 0 and dry >= _DRY_BATCHES:
                        exhausted[task.name] = s.programs_per_task - left
                        left = 0
                    batch = _Batch(candidates, builder, runner, target) if candidates else None
                    for finishing in [inflight] + ([batch] if not overlap else []):
                        if finishing is not None:
                            results = finishing.finish(database, workload, target, task.name, failures, tally)
                            sampler.notify(finishing.candidates, results)
                            record_run(out, manifest, tally.measured, time.perf_counter() - start, ended=False)
                            if on_measured:
                                on_measured(len(finishing.candidates))
                    inflight = batch if overlap else None
                duplicates += sampler.counts.duplicates
                sampler.close()
    finally:
        seconds = time.perf_counter() - start
        record_run(out, manifest, tally.measured, seconds, ended=True)
    total = sum(len(p) for p in past) + tally.measured
    return CollectReport(out=str(out), tasks=len(mine), measured=tally.measured, failed=dict(sorted(tally.failed.items())),
                         duplicates=duplicates, held=total, exhausted=exhausted, seconds=round(seconds, 1),
                         programs_per_second=round(tally.measured / max(seconds, 1e-9), 3),
                         shard=f"{index}/{count}", notes=notes)

