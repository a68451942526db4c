"""TenSet datasets (Ansor records) as a program source: each record replayed on TIR.

A unit is one record file (one task on one device). The file's task is the one most of its
records name: a line naming another task is reported against its line, not allowed to decide
the fate of the whole file. A measured record whose costs cannot be a measurement (a success
without positive times) is reported against its line too, and takes no part in the labels.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Optional, Union

import numpy as np

from ..tenset.dataset import UNMEASURED, DatasetError, TaskIndex, discover, file_task_key, load_task_index
from ..tenset.labels import cost_problem, mean_costs, task_labels
from ..tenset.records import BadLine, Record, parse_lines, read_records
from ..tenset.tasks import Task
from .base import (LiveProgram, ProgramSource, SourceProgram, TailedFile, TailedSource, Unit, UnitPrograms,
                   register_source)


@lru_cache(maxsize=4)
def _task_index(root: str) -> TaskIndex:
    # Once per process: task pickles are read and decoded once, not per record file.
    return load_task_index(discover(root))


def _unknown_task(index: TaskIndex) -> str:
    """Why a record has no task; a pickle that could not be read is the likely cause, so it is named."""
    reason = "unknown task: no task pickle has this workload key"
    if index.problems:
        reason += f" ({len(index.problems)} task pickles could not be read, e.g. {index.problems[0][:300]})"
    return reason


def _replayed(task: Optional[Task], rec: Record, position: int, cost: float, label: float,
              index: TaskIndex) -> SourceProgram:
    from ..replay import replay_record

    if task is None:
        func, reason = None, _unknown_task(index)
    else:
        result = replay_record(task, rec)
        func = result.schedule if result.ok else None
        reason = "" if result.ok else f"{result.reason}: {result.detail}"
    return SourceProgram(rec.source.line, position, cost, rec.error_no, label, func, reason, rec.raw_steps)


@register_source
class TenSetSource(ProgramSource):
    kind = "tenset"

    @classmethod
    def detect(cls, path: Path) -> bool:
        try:
            discover(path)
        except DatasetError:
            return False
        return True

    def _layout(self):
        return discover(self.root)

    def units(self, device: Optional[str] = None, include_unmeasured: bool = False) -> list[Unit]:
        layout = self._layout()
        files = layout.record_files(device)
        if include_unmeasured:
            files += [(UNMEASURED, p) for p in layout.unmeasured_files()]
        return [Unit(k, dev, str(p.relative_to(self.root))) for k, (dev, p) in enumerate(files)]

    def files(self) -> list[Path]:
        layout = self._layout()
        tasks = [p for p in (layout.all_tasks, *layout.network_files) if p is not None]
        return tasks + [p for _, p in layout.record_files()] + layout.unmeasured_files()

    def networks(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for net in _task_index(str(self.root)).networks:
            for t, w in zip(net.tasks, net.weights):
                out.setdefault(f"{t.workload_key}|{t.target_kind}", {})[net.name] = w
        return out

    def programs(self, unit: Unit) -> UnitPrograms:
        records: list[Record] = []
        bad: list[tuple[int, str]] = []
        for item in read_records(self.root / unit.name):
            if isinstance(item, BadLine):
                bad.append((item.source.line, f"unreadable line: {item.reason}"))
            else:
                records.append(item)
        if not records:
            return UnitPrograms("", "", [], 0, bad)
        key, kind = file_task_key(records)
        measured = unit.device != UNMEASURED
        problems = [cost_problem(r.costs, r.error_no) if measured else None for r in records]
        of_task = np.array([(r.workload_key.text, r.target_kind) == (key, kind) for r in records])
        usable = of_task & np.array([p is None for p in problems], dtype=bool)
        cost = mean_costs([r.costs for r in records])
        labels = (task_labels(cost, usable & np.array([r.ok for r in records], dtype=bool)) if measured
                  else np.full(len(records), np.nan))
        index = _task_index(str(self.root))
        task = index.tasks.get((key, kind))

        def program(pos: int, rec: Record) -> SourceProgram:
            reason = (problems[pos] if of_task[pos] else
                      f"other task: workload key {rec.workload_key.text} is not the file's {key}"
                      + (f" (target {rec.target_kind}, not {kind})" if rec.target_kind != kind else ""))
            if reason:
                return SourceProgram(rec.source.line, pos, float(cost[pos]), rec.error_no, float("nan"), None, reason)
            return _replayed(task, rec, pos, float(cost[pos]), float(labels[pos]), index)

        return UnitPrograms(key, kind, (program(i, r) for i, r in enumerate(records)), len(records), bad)


class TenSetLog(TailedSource):
    """An Ansor record file a tuning run is appending to; tasks come from a TenSet dataset's pickles."""

    def __init__(self, path: Union[str, Path], tasks_root: Union[str, Path]):
        self.tail = TailedFile(Path(path))
        self.tasks_root = str(Path(tasks_root).resolve())
        _task_index(self.tasks_root)  # a bad tasks directory fails now, not at the first record

    def poll(self) -> list[Union[LiveProgram, BadLine]]:
        lines = self.tail.poll()
        index = _task_index(self.tasks_root)
        out: list[Union[LiveProgram, BadLine]] = []
        for item in parse_lines(lines, str(self.tail.path), self.tail.lines_read - len(lines) + 1):
            if isinstance(item, BadLine):
                out.append(item)
                continue
            task = index.tasks.get((item.workload_key.text, item.target_kind))
            prog = _replayed(task, item, 0, item.mean_cost, float("nan"), index)
            out.append(LiveProgram(item.workload_key.text, item.target_kind, prog))
        return out
