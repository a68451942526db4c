"""The records measured so far in a tuning run, with labels recomputed as new bests arrive."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..store.reader import StoreData
from ..tenset.labels import labels_by_task
from ..tenset.step_vectors import step_vectors


@dataclass
class OnlineProgram:
    """Raw features of one measured program (as the store keeps them) and its cost."""

    statements: np.ndarray  # [n, 174]
    symbols: np.ndarray  # [n, 11]
    dataflow: np.ndarray  # [8, 23]
    steps: np.ndarray  # [MAX_STEPS, STEP_DIM]
    draft_score: float
    cost: float  # seconds
    ok: bool  # measured without error (failures get label 0)
    task: str  # the task the program belongs to (labels are per task)

    @classmethod
    def of_features(cls, features, cost: float, ok: bool, task: str, raw_steps: tuple = ()) -> "OnlineProgram":
        """From extracted ProgramFeatures; ``raw_steps`` are Ansor's (MetaSchedule programs have none)."""
        return cls(features.statements, features.symbols, features.dataflow, step_vectors(raw_steps),
                   features.draft_score, cost, ok, task)


@dataclass
class OnlineRecords:
    programs: list[OnlineProgram] = field(default_factory=list)
    _cached: Optional[StoreData] = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.programs)

    def add(self, program: OnlineProgram) -> None:
        self.programs.append(program)
        self._cached = None

    def data(self) -> StoreData:
        """Everything so far as a StoreData, labels y = min_cost / cost within each task so far."""
        if self._cached is None:
            self._cached = _as_store_data(self.programs)
        return self._cached


def _as_store_data(programs: list[OnlineProgram]) -> StoreData:
    tasks = sorted({p.task for p in programs})
    task_id = np.array([tasks.index(p.task) for p in programs], dtype=np.int32)
    cost = np.array([p.cost for p in programs], dtype=np.float64)
    labels = labels_by_task(cost, np.array([p.ok for p in programs], dtype=bool), task_id).astype(np.float32)
    counts = np.array([len(p.statements) for p in programs], dtype=np.int64)
    n = len(programs)
    return StoreData(
        records={"label": labels, "cost": cost, "task_id": task_id, "line": np.arange(1, n + 1, dtype=np.int32),
                 "draft_score": np.array([p.draft_score for p in programs], dtype=np.float32),
                 "stmt_offset": np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                 "stmt_count": counts.astype(np.int32)},
        statements=np.concatenate([p.statements for p in programs]).astype(np.float32),
        symbols=np.concatenate([p.symbols for p in programs]).astype(np.float32),
        dataflow=np.stack([p.dataflow for p in programs]).astype(np.float32),
        steps=np.stack([p.steps for p in programs]).astype(np.float32),
        task_keys=tasks, task_networks=[{} for _ in tasks], file_paths=[], file_devices=[],
    )


def programs_of_store(d: StoreData, rows: np.ndarray) -> list[OnlineProgram]:
    """Store rows as online programs (simulating a tuning run over records already measured)."""
    off = d.records["stmt_offset"]
    return [OnlineProgram(d.statements[off[r]:off[r + 1]], d.symbols[off[r]:off[r + 1]], d.dataflow[r], d.steps[r],
                          float(d.records["draft_score"][r]), float(d.records["cost"][r]),
                          bool(d.records["error_no"][r] == 0), d.task_keys[int(d.records["task_id"][r])])
            for r in rows]
