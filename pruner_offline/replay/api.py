"""Public entry points: replay a record of a task, never raising for a bad record.

A task's ``layout_rewrite_option`` is deliberately not applied: Ansor's feature extraction
replays the steps without layout rewrite (auto_scheduler/feature.cc calls ``ApplySteps`` with
the default ``NoRewrite``), so the features TenSet models learn from describe the weights in their
original layout. Rewriting them here (MetaSchedule's RewriteLayout) moved the weight's unique
cache lines away from Ansor's (2^15 against 2^13 on a 1x1 conv2d) instead of towards them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Callable, Optional, Sequence

import tvm
from tvm import s_tir, tirx

from ..tenset.records import Record
from ..tenset.steps import Step, StepError
from ..tenset.tasks import Task
from ..tenset.te_graph import ComputeGraph
from .compute import ComputeBuildError, build_prim_func
from .replayer import Replayer, ReplayError, _first_line, prefix_key


@dataclass(frozen=True)
class ReplayResult:
    schedule: Optional[s_tir.Schedule]  # holds the scheduled module; None on failure
    reason: Optional[str] = None  # short, stable failure category (histogram key)
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.schedule is not None

    @property
    def mod(self) -> Optional[tvm.IRModule]:
        """The scheduled module ("main"), None on failure."""
        return self.schedule.mod if self.schedule is not None else None


@lru_cache(maxsize=64)
def _base_func(task: Task) -> tirx.PrimFunc:
    return build_prim_func(task.graph)


@lru_cache(maxsize=64)
def _start(task: Task) -> Replayer:
    # a task's records replay on copies of one start (a TenSet task file holds ~3,700 records)
    return Replayer.start(_base_func(task), task.graph)


@lru_cache(maxsize=256)
def _after_prefix(task: Task, key: tuple) -> Replayer:
    # a task's records mostly share their leading stage steps (replayer.prefix_key)
    prefix = Replayer(_start(task), ())
    prefix.apply_prefix(key)
    return prefix


def _replay(start: Callable[[], Replayer], steps: Sequence[Step], first: int = 0) -> ReplayResult:
    try:
        return ReplayResult(Replayer(start(), steps).run(first))
    except ReplayError as exc:
        return ReplayResult(None, exc.category, exc.detail)
    except Exception as exc:  # a record must never take the run down
        return ReplayResult(None, f"internal error {type(exc).__name__}", _first_line(exc))


def replay_steps(func: tirx.PrimFunc, graph: ComputeGraph, steps: Sequence[Step]) -> ReplayResult:
    """Apply Ansor steps to ``func`` (the unscheduled PrimFunc of ``graph``)."""
    return _replay(lambda: Replayer.start(func, graph), steps)


def replay_record(task: Task, record: Record) -> ReplayResult:
    """Replay ``record`` on ``task``'s compute (they must share workload key and target kind)."""
    if (record.workload_key.text, record.target_kind) != task.key:
        return ReplayResult(None, "record does not belong to task")
    try:
        steps = record.steps
    except StepError as exc:
        return ReplayResult(None, "bad step", str(exc))
    try:
        _base_func(task)
    except ComputeBuildError as exc:
        return ReplayResult(None, "compute rebuild", str(exc))
    except Exception as exc:
        return ReplayResult(None, f"compute rebuild {type(exc).__name__}", _first_line(exc))
    key = prefix_key(steps)
    if key:
        try:
            after = _after_prefix(task, key)
        except Exception:  # noqa: BLE001 - replayed from the start, which says which step fails and why
            pass
        else:
            return _replay(lambda: after, steps, first=len(key))
    return _replay(partial(_start, task), steps)
