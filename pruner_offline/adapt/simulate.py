"""Replay already-measured records as if a tuning run were measuring them, round by round, and
score every method on held-out records as the online set grows."""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

from ..models.metrics import ranking_report
from ..store.reader import StoreData
from ..training.data import gather_batch
from ..training.module import CostModelModule
from .methods import AdaptConfig, Method, make_method
from .online import OnlineProgram, OnlineRecords


def tuning_order(d: StoreData) -> np.ndarray:
    """Rows in the order a tuning run over all tasks at once would measure them: each task's
    records in file order, tasks interleaved."""
    return np.lexsort((d.records["task_id"], d.records["position"]))


def held_out_rows(d: StoreData, fraction: float) -> np.ndarray:
    """Mask of the last ``fraction`` of each task's records (by file position)."""
    task = d.records["task_id"]
    size = np.bincount(task)
    return d.records["position"] >= np.ceil((1.0 - fraction) * size[task])


def heldout_scores(module: CostModelModule, heldout: StoreData) -> dict[str, float]:
    rows = np.arange(len(heldout.records["label"]))
    pred = module.predict_rows(lambda r: gather_batch(heldout, r), rows)
    rep = ranking_report(pred, heldout.records["label"], heldout.records["cost"], heldout.records["task_id"])
    return {k: round(float(v), 6) for k, v in rep.items()}


class Simulation(NamedTuple):
    curves: dict[str, list[dict]]  # {method: [{"online_records": n, "peak@1": x, "peak@5": y, ...}, ...]}
    methods: list[Method]  # as they stand after the last record: each one's predictor is its adapted model


def simulate(pretrained: CostModelModule, methods: Sequence[str], stream: Sequence[OnlineProgram],
             heldout: Optional[StoreData], cfg: AdaptConfig, eval_every: int = 50,
             on_round: Optional[Callable[[int], None]] = None) -> Simulation:
    """Every method through ``stream``; with ``heldout``, its curve: a point at 0 records (the
    pretrained model), then one every ``eval_every`` records and one at the end."""
    ms = [make_method(m, pretrained, cfg) for m in methods]
    curves: dict[str, list[dict]] = {m.name: [] for m in ms}

    def point(n: int) -> None:
        if heldout is None:
            return
        for m in ms:
            scores = heldout_scores(m.predictor, heldout)
            curves[m.name].append({"online_records": n, **scores, "retrains": m.retrains})

    online = OnlineRecords()
    point(0)
    rounds = 0
    for start in range(0, len(stream), cfg.round_size):
        for p in stream[start:start + cfg.round_size]:
            online.add(p)
        rounds += 1
        for m in ms:
            m.after_round(online, rounds)
        n = len(online)
        if n // eval_every > (n - cfg.round_size) // eval_every or n == len(stream):
            point(n)
        if on_round:
            on_round(n)
    return Simulation(curves, ms)


def plot_curves(curves: dict[str, list[dict]], path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, metric in zip(axes, ("peak@1", "peak@5")):
        for name, pts in curves.items():
            ax.plot([p["online_records"] for p in pts], [p[metric] for p in pts], marker="o", ms=3, label=name)
        ax.set_xlabel("online records (measured on the new device)")
        ax.set_ylabel(f"held-out {metric}")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
