"""A mini-batch of records as every model sees it: ragged statements flattened with segment ids."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

import numpy as np
import torch


@dataclass
class Batch:
    statements: torch.Tensor  # [S, stmt_dim], normalized
    symbols: torch.Tensor  # [S, 11] PSA symbols, normalized
    segment: torch.Tensor  # [S] long: the record each statement row belongs to
    dataflow: torch.Tensor  # [B, 8, 23], normalized
    steps: torch.Tensor  # [B, L, step_dim], normalized
    draft_score: torch.Tensor  # [B] analytic draft score (log-scaled)
    y: torch.Tensor  # [B] labels
    task: torch.Tensor  # [B] long task ids (for metrics)

    @property
    def size(self) -> int:
        return int(self.y.shape[0])

    def to(self, device: torch.device) -> "Batch":
        return Batch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def make_batch(statements: np.ndarray, symbols: np.ndarray, counts: np.ndarray, dataflow: np.ndarray,
               steps: np.ndarray, draft_score: np.ndarray, y: Optional[np.ndarray] = None,
               task: Optional[np.ndarray] = None) -> Batch:
    """The one way raw (unnormalized) features become a Batch: training, adaptation and tuning.

    ``statements``/``symbols`` hold the statement rows of all records back to back, ``counts`` how
    many belong to each record; ``y`` and ``task`` default to zeros where there are none (tuning).
    """
    n = len(counts)
    f32 = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
    return Batch(
        statements=f32(statements), symbols=f32(symbols),
        segment=torch.from_numpy(np.repeat(np.arange(n), counts)),
        dataflow=f32(dataflow), steps=f32(steps), draft_score=f32(draft_score),
        y=f32(np.zeros(n) if y is None else y),
        task=torch.from_numpy(np.zeros(n, np.int64) if task is None else np.asarray(task, dtype=np.int64)),
    )
