"""Feature scaling fit on the training split and carried inside the model (so inference matches).

As published for PaCM: each column divided by its maximum over the training set. PSA symbols
and the analytic draft score span many orders of magnitude, so they are log1p-scaled first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import torch


@dataclass(frozen=True)
class Scales:
    statements: np.ndarray  # [stmt_dim]
    symbols: np.ndarray  # [11]   (of log1p(symbols))
    dataflow: np.ndarray  # [23]
    steps: np.ndarray  # [step_dim]
    draft_score: np.ndarray  # [1]  (of log1p(score))


def fit_scales(statements: np.ndarray, symbols: np.ndarray, dataflow: np.ndarray, steps: np.ndarray,
               draft_score: np.ndarray) -> Scales:
    return fit_scales_streaming([(statements, symbols, dataflow, steps, draft_score)])


def fit_scales_streaming(parts: Iterable[tuple[np.ndarray, ...]]) -> Scales:
    """Scales of records that come in parts, each (statements, symbols, dataflow, steps, draft_score)
    of some records: a training split too large for memory is scaled a chunk at a time."""
    maxima: dict[str, np.ndarray] = {}
    for part in parts:
        statements, symbols, dataflow, steps, draft_score = part
        for name, x in (("statements", statements), ("symbols", log_scale(symbols)),
                        ("dataflow", dataflow.reshape(-1, dataflow.shape[-1])),
                        ("steps", steps.reshape(-1, steps.shape[-1])),
                        ("draft_score", log_scale(draft_score.reshape(-1, 1)))):
            m = maxima.setdefault(name, np.zeros(x.shape[1:], np.float32))
            if len(x):
                np.maximum(m, np.abs(x).max(axis=0), out=m)
    # a column that is zero throughout (or a split without records) is left as it is
    return Scales(**{name: np.where(m > 0, m, 1.0).astype(np.float32) for name, m in maxima.items()})


def log_scale(x):
    """Signed log1p, for numpy arrays and tensors alike."""
    if isinstance(x, torch.Tensor):
        return torch.sign(x) * torch.log1p(x.abs())
    return np.sign(x) * np.log1p(np.abs(x))
