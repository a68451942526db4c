"""A directory of past MetaSchedule tuning runs as one program source.

Users keep one work directory per run (``tune_tir``/``tune_relax``/``pruner-train tune --work-dir``),
each holding a JSON database, often under a common parent and often tuning a workload more than
once. Here every database found under the root is read, and a unit is one workload (by the
structural hash MetaSchedule keys it with) and target kind across all of them: a workload tuned in
three runs is one task whose labels are relative to its best program over all three runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

import numpy as np

from ..tenset.labels import task_labels
from .base import ProgramSource, SourceError, Unit, UnitPrograms, register_source
from .metaschedule import (GZIP_SUFFIX, RECORD_FILE, WORKLOAD_FILE, MSRecordLine, _program, _Workloads,
                           database_file, grouped_records, is_metaschedule_database)


def find_databases(root: Path) -> list[Path]:
    """Every directory under root (not root itself) holding a MetaSchedule database, sorted.

    Links to directories are followed, since a collection of past runs is often a directory of
    links to the work directories where the runs left them; each real directory is entered once,
    so a link back up the tree cannot loop."""
    found, entered = [], set()
    for top, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(top)
        if real in entered:
            dirs.clear()
            continue
        entered.add(real)
        if (WORKLOAD_FILE in files or WORKLOAD_FILE + GZIP_SUFFIX in files) and Path(top) != root and is_metaschedule_database(Path(top)):
            found.append(Path(top))
    return sorted(found)


@dataclass(frozen=True)
class _Part:
    """One database's records of one workload."""

    database: Path
    workload: int


def _stamp(files: list[Path]) -> tuple:
    return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)


@lru_cache(maxsize=2)
def _tasks(root: str, _stamp_key: tuple) -> list[tuple[str, str, list[_Part]]]:
    """(workload hash, target kind, parts) per task, in order of first appearance."""
    tasks: dict[tuple[str, str], list[_Part]] = {}
    for db in find_databases(Path(root)):
        by_workload, _, lines = grouped_records(db)
        workloads = _Workloads(lines)
        for k in range(len(lines)):
            kinds = sorted({r.target_kind for r in by_workload.get(k, [])}) or [""]
            for kind in kinds:
                tasks.setdefault((workloads.hash(k), kind), []).append(_Part(db, k))
    return [(h, kind, parts) for (h, kind), parts in tasks.items()]


@register_source
class MetaScheduleRunsSource(ProgramSource):
    kind = "metaschedule-runs"

    @classmethod
    def detect(cls, path: Path) -> bool:
        return not is_metaschedule_database(path) and bool(find_databases(path))

    def databases(self) -> list[Path]:
        return find_databases(self.root)

    def files(self) -> list[Path]:
        return [database_file(db, name) for db in self.databases() for name in (WORKLOAD_FILE, RECORD_FILE)]

    def _task_list(self) -> list[tuple[str, str, list[_Part]]]:
        dbs = self.databases()
        if not dbs:
            raise SourceError(f"{self.root}: no MetaSchedule database ({WORKLOAD_FILE} + {RECORD_FILE}) under it")
        return _tasks(str(self.root), _stamp([database_file(db, f) for db in dbs for f in (WORKLOAD_FILE, RECORD_FILE)]))

    def units(self, device: Optional[str] = None, include_unmeasured: bool = False) -> list[Unit]:
        if device is not None and device != self.root.name:
            return []
        return [Unit(i, self.root.name, f"ms:{h} ({kind or 'no records'}) in "
                     + ", ".join(f"{p.database.relative_to(self.root)}#workload={p.workload}" for p in parts))
                for i, (h, kind, parts) in enumerate(self._task_list())]

    def programs(self, unit: Unit) -> UnitPrograms:
        workload_hash, kind, parts = self._task_list()[unit.index]
        records: list[tuple[_Workloads, MSRecordLine]] = []
        bad_lines: list[tuple[int, str]] = []
        for part in parts:
            by_workload, bad, lines = grouped_records(part.database)
            workloads = _Workloads(lines)
            records += [(workloads, r) for r in by_workload.get(part.workload, []) if r.target_kind == kind]
            if part.workload == 0:  # every workload shares its database's record file: report its lines once
                bad_lines += [(b.source.line, f"{b.source.path}: unreadable line: {b.reason}") for b in bad]
        labels = task_labels(np.array([r.cost for _, r in records]), np.array([r.ok for _, r in records], dtype=bool))
        programs = (_program(w, rec, pos, float(labels[pos])) for pos, (w, rec) in enumerate(records))
        return UnitPrograms(f"ms:{workload_hash}", kind, programs, len(records), bad_lines)
