"""Spreading what the search measures over loop structures.

Candidates of one loop structure (the same loops, stores and statement nesting; features/
draft_templates.py) differ only in tile sizes, and the draft score orders those well; between
structures (where a stage is computed, which loops are fused, parallel or vectorized) it errs far
more, and a search that follows it alone converges on one or two structures. In bench/tune.py's
runs the draft-driven search measured 2-10 distinct structures in 64 trials where XGB (a random
order before its 100th sample) measured 23-53, and it lost on exactly the workloads where the draft's
favourite structure was not the fastest (conv2d NCHW: 2 structures, 2.5x slower than XGB's best).
Capping how many candidates of one structure a shortlist or batch takes keeps the draft's order
within each structure and lets the verifier and the measurements judge between structures.
"""

from __future__ import annotations

import numpy as np


def capped_order(order: np.ndarray, groups: np.ndarray, cap: int) -> np.ndarray:
    """`order` (indices, best first) rearranged so that each group's first `cap` members come first,
    in their order, followed by the rest, in their order: taking the first k of the result takes at
    most `cap` of a group while other groups still have candidates. groups[i] is the group of
    index i; cap < 1 keeps `order` as it is."""
    order = np.asarray(order)
    if cap < 1 or not len(order):
        return order
    seen: dict[int, int] = {}
    within = np.zeros(len(order), dtype=bool)
    for j, i in enumerate(order):
        g = int(groups[i])
        seen[g] = seen.get(g, 0) + 1
        within[j] = seen[g] <= cap
    return np.concatenate([order[within], order[~within]])
