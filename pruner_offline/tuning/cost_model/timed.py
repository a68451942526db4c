"""Time spent inside any cost model, measured the same way for ours and MetaSchedule's."""

from __future__ import annotations

import time
from dataclasses import asdict

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import CostModel, PyCostModel


@derived_object
class TimedCostModel(PyCostModel):
    """Delegates to `inner` (any MetaSchedule CostModel) and adds up the seconds spent in it: wall
    time, and this process's CPU time (all its threads: XGB's feature extraction and training use
    several), which other jobs on a shared machine inflate far less."""

    def __init__(self, inner: CostModel):
        super().__init__()
        self.inner = inner
        self.predict_s = 0.0
        self.update_s = 0.0
        self.cpu_s = 0.0

    def load(self, path: str) -> None:
        self.inner.load(path)

    def save(self, path: str) -> None:
        self.inner.save(path)

    def predict(self, context, candidates) -> np.ndarray:
        start, cpu = time.perf_counter(), time.process_time()
        scores = self.inner.predict(context, candidates)
        self.predict_s += time.perf_counter() - start
        self.cpu_s += time.process_time() - cpu
        return scores

    def update(self, context, candidates, results) -> None:
        start, cpu = time.perf_counter(), time.process_time()
        self.inner.update(context, candidates, results)
        self.update_s += time.perf_counter() - start
        self.cpu_s += time.process_time() - cpu


def cost_seconds(model: TimedCostModel, cpu: bool = False) -> float:
    """Inside predict and update, and inside our model when a search strategy calls it directly;
    wall time, or with cpu this process's CPU time."""
    times = getattr(model.inner, "times", None)
    direct = 0.0 if times is None else times.search_cpu_s if cpu else times.search_s
    return round((model.cpu_s if cpu else model.predict_s + model.update_s) + direct, 4)


def cost_breakdown(model: TimedCostModel) -> dict[str, float]:
    out = {"predict_s": model.predict_s, "update_s": model.update_s}
    inner = model.inner
    if hasattr(inner, "times"):  # ours: where the time inside went
        out |= {f"model_{k}": v for k, v in asdict(inner.times).items()}
        out |= {f"features_{k}": v for k, v in asdict(inner.features.times).items()}
        out |= {f"templates_{k}": v for k, v in asdict(inner.features.templates.times).items()}
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}
