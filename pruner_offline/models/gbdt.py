"""Gradient-boosted trees on pooled statement features, a strong classic baseline.

scikit-learn fits the trees; the fitted ensemble is then kept as plain arrays (``TreeEnsemble``),
which a model file stores as tensors and which predicts with numpy alone: no pickle, and no
dependence on the scikit-learn version that trained it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor


def pooled_features(statements: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sum, mean and max of each record's statement rows (``counts[i]`` rows of record i, back to
    back): a fixed-size vector per program; zeros for a record without statements."""
    counts = np.asarray(counts, dtype=np.int64)
    out = np.zeros((len(counts), statements.shape[1] * 3), dtype=np.float32)
    some = counts > 0
    if some.any():
        starts = (np.cumsum(counts) - counts)[some]
        sums = np.add.reduceat(statements, starts, axis=0)
        out[some] = np.concatenate([sums, sums / counts[some, None], np.maximum.reduceat(statements, starts, axis=0)],
                                   axis=1)
    return out


def fit_gbdt(x: np.ndarray, y: np.ndarray, seed: int = 0) -> HistGradientBoostingRegressor:
    model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.1, max_leaf_nodes=31,
                                          early_stopping=True, validation_fraction=0.1, random_state=seed)
    return model.fit(x, y)


@dataclass
class TreeEnsemble:
    """A fitted ensemble as plain arrays, so that it is saved without pickle and predicts without
    scikit-learn: node arrays of all trees back to back, ``roots`` the first node of each tree."""

    feature: np.ndarray  # int64 [nodes], the split feature
    threshold: np.ndarray  # float64 [nodes]: x <= threshold goes left
    missing_left: np.ndarray  # bool [nodes]: where a NaN goes
    left: np.ndarray  # int64 [nodes], global node index
    right: np.ndarray  # int64 [nodes]
    is_leaf: np.ndarray  # bool [nodes]
    value: np.ndarray  # float64 [nodes], leaf values
    roots: np.ndarray  # int64 [trees]
    baseline: float
    n_features: int

    @classmethod
    def from_sklearn(cls, model: HistGradientBoostingRegressor) -> "TreeEnsemble":
        parts, roots, offset = [], [], 0
        for (tree,) in model._predictors:  # one tree per boosting iteration for a regressor
            nodes = tree.nodes
            if nodes["is_categorical"].any():
                raise ValueError("categorical splits are not supported: the features are numeric")
            roots.append(offset)
            parts.append((nodes, offset))
            offset += len(nodes)
        def cat(name: str, dtype: type) -> np.ndarray:
            return np.concatenate([n[name].astype(dtype) for n, _ in parts]) if parts else np.zeros(0, dtype)

        def links(name: str) -> np.ndarray:  # tree-local child indices -> global ones
            return np.concatenate([n[name].astype(np.int64) + o for n, o in parts]) if parts else np.zeros(0, np.int64)

        return cls(cat("feature_idx", np.int64), cat("num_threshold", np.float64),
                   cat("missing_go_to_left", bool), links("left"), links("right"),
                   cat("is_leaf", bool), cat("value", np.float64), np.array(roots, dtype=np.int64),
                   float(np.ravel(model._baseline_prediction)[0]), int(model.n_features_in_))

    def predict(self, x: np.ndarray) -> np.ndarray:
        """All trees, all rows at once: each row walks down one level per step."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"expected [rows, {self.n_features}] features, got {list(x.shape)}")
        rows = np.arange(len(x))
        out = np.full(len(x), self.baseline)
        for root in self.roots:
            node = np.full(len(x), root)
            while True:
                inner = ~self.is_leaf[node]
                if not inner.any():
                    break
                n, r = node[inner], rows[inner]
                v = x[r, self.feature[n]]
                go_left = np.where(np.isnan(v), self.missing_left[n], v <= self.threshold[n])
                node[inner] = np.where(go_left, self.left[n], self.right[n])
            out += self.value[node]
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in ("feature", "threshold", "missing_left", "left", "right", "is_leaf",
                                               "value", "roots")}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], baseline: float, n_features: int) -> "TreeEnsemble":
        ensemble = cls(**{k: np.asarray(v) for k, v in arrays.items()}, baseline=float(baseline),
                       n_features=int(n_features))
        n = len(ensemble.feature)
        links = np.concatenate([ensemble.left[~ensemble.is_leaf], ensemble.right[~ensemble.is_leaf], ensemble.roots])
        if any(len(a) != n for a in (ensemble.threshold, ensemble.left, ensemble.right, ensemble.is_leaf,
                                     ensemble.value, ensemble.missing_left)) or \
                (len(links) and (links.min() < 0 or links.max() >= n)) or \
                (n and (ensemble.feature[~ensemble.is_leaf].max(initial=0) >= n_features)):
            raise ValueError("inconsistent tree arrays")
        return ensemble
