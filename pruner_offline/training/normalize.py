"""Feature scaling fit on the training split and carried inside the model (so inference matches).

As published for PaCM: each column divided by its maximum over the training set. PSA symbols
and the analytic draft score span many orders of magnitude, so they are log1p-scaled first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Scales:
    statements: np.ndarray  # [stmt_dim]
    symbols: np.ndarray  # [11]   (of log1p(symbols))
    dataflow: np.ndarray  # [23]
    steps: np.ndarray  # [step_dim]
    draft_score: np.ndarray  # [1]  (of log1p(score))


def _col_max(x: np.ndarray) -> np.ndarray:
    m = np.abs(x).max(axis=0) if len(x) else np.ones(x.shape[1:], np.float32)
    return np.where(m > 0, m, 1.0).astype(np.float32)


def fit_scales(statements: np.ndarray, symbols: np.ndarray, dataflow: np.ndarray, steps: np.ndarray,
               draft_score: np.ndarray) -> Scales:
    return Scales(
        statements=_col_max(statements),
        symbols=_col_max(log_scale(symbols)),
        dataflow=_col_max(dataflow.reshape(-1, dataflow.shape[-1])),
        steps=_col_max(steps.reshape(-1, steps.shape[-1])),
        draft_score=_col_max(log_scale(draft_score.reshape(-1, 1))),
    )


def log_scale(x):
    """Signed log1p, for numpy arrays and tensors alike."""
    if isinstance(x, torch.Tensor):
        return torch.sign(x) * torch.log1p(x.abs())
    return np.sign(x) * np.log1p(np.abs(x))
