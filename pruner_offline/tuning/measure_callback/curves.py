"""What a tuning run learns after each measured batch: the best latency so far, for one task
(LatencyCurve) or every task of a network (TaskBests), as MetaSchedule measure callbacks."""

from __future__ import annotations

import time
from typing import Callable, Optional

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

from ...measure.outcome import measured_seconds


@derived_object
class LatencyCurve(PyMeasureCallback):
    """Best latency so far, wall time and, given ``cost`` (the seconds inside the cost model so
    far), those seconds after every measured batch. Run after MetaSchedule's own callbacks, it
    sees each batch's update() done. ``past_best_s`` and ``past_trials``: what earlier runs of the
    work directory measured (resume.py), counted in from the first batch on."""

    def __init__(self, start: float, cost: Optional[Callable[[], float]] = None,
                 past_best_s: float = float("inf"), past_trials: int = 0):
        super().__init__()
        self.start = start
        self.cost = cost
        self.past_best_s = past_best_s
        self.past_trials = past_trials
        self.best_s: list[float] = []
        self.elapsed_s: list[float] = []
        self.trials: list[int] = []
        self.cost_s: list[float] = []

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        best = min([self.best_s[-1] if self.best_s else self.past_best_s] + [measured_seconds(r) for r in runner_results])
        self.best_s.append(best)
        self.elapsed_s.append(time.perf_counter() - self.start)
        self.trials.append((self.trials[-1] if self.trials else self.past_trials) + len(runner_results))
        if self.cost is not None:
            self.cost_s.append(self.cost())


@derived_object
class TaskBests(PyMeasureCallback):
    """Trials measured and best latency so far of every task of a multi-task run, by task id,
    starting from what earlier runs of the work directory measured (``past``, resume.py)."""

    def __init__(self, past: list[tuple[int, float]]):
        super().__init__()
        self.trials = [n for n, _ in past]
        self.best_s = [best for _, best in past]

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        self.trials[task_id] += len(runner_results)
        self.best_s[task_id] = min([self.best_s[task_id]] + [measured_seconds(r) for r in runner_results])
