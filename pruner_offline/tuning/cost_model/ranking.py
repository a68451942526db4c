"""Draft-then-verify as scores: the order MetaSchedule's evolutionary search should see.

The search uses scores twice: to keep the best unmeasured candidates, and as multinomial weights
when it picks parents to mutate. Raw model outputs suit neither (a ranking loss fixes no scale, and
may go negative), so scores are built from ranks, in (0, 1]:
- verified candidates (the draft model's best fraction, re-ranked by PaCM): (0.5, 1];
- the rest, in draft order: (0, 0.5];
- candidates that could not be featurized: 0.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np


def verify_count(n_valid: int, fraction: float, most: Optional[int] = None) -> int:
    k = min(n_valid, max(1, math.ceil(fraction * n_valid))) if n_valid else 0
    return k if most is None else min(k, most)


def _rank_scores(values: np.ndarray) -> np.ndarray:
    """1 for the highest value down to 1/n for the lowest (ties keep input order)."""
    n = len(values)
    order = np.argsort(-values, kind="stable")
    scores = np.empty(n)
    scores[order] = (n - np.arange(n)) / n
    return scores


def draft_then_verify(draft: np.ndarray, fraction: float,
                      verify: Optional[Callable[[np.ndarray], np.ndarray]], most: Optional[int] = None) -> np.ndarray:
    """Scores for candidates given their draft scores (NaN: not featurizable).

    verify(indices) returns the verifier's scores of those candidates (NaN where it cannot score
    one); it is called once, on the draft model's best `fraction`, at most `most` of them. Without
    a verifier the draft order is the result.
    """
    scores = np.zeros(len(draft))
    valid = np.flatnonzero(~np.isnan(draft))
    if not len(valid):
        return scores
    scores[valid] = 0.5 * _rank_scores(draft[valid])
    if verify is None:
        return scores * 2
    k = verify_count(len(valid), fraction, most)
    top = valid[np.argsort(-draft[valid], kind="stable")[:k]]
    verified = np.asarray(verify(top), dtype=np.float64)
    ok = ~np.isnan(verified)
    scores[top[ok]] = 0.5 + 0.5 * _rank_scores(verified[ok])
    return scores
