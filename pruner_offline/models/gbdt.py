"""Gradient-boosted trees on pooled statement features (scikit-learn), a strong classic baseline."""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor


def pooled_features(statements: np.ndarray, stmt_offset: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Sum, mean and max of each record's statement rows: a fixed-size vector per program."""
    out = np.zeros((len(rows), statements.shape[1] * 3), dtype=np.float32)
    for i, r in enumerate(rows):
        s = statements[stmt_offset[r]:stmt_offset[r + 1]]
        if len(s):
            out[i] = np.concatenate([s.sum(0), s.mean(0), s.max(0)])
    return out


def fit_gbdt(x: np.ndarray, y: np.ndarray, seed: int = 0) -> HistGradientBoostingRegressor:
    model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.1, max_leaf_nodes=31,
                                          early_stopping=True, validation_fraction=0.1, random_state=seed)
    return model.fit(x, y)
