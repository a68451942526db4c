"""The analytic draft score, calibrated per loop structure by the programs measured so far.

The analytic score is a modelled throughput (1 / seconds), so measured seconds x score is how far
the model is off for one program. Within a loop structure (search/spread.py) that factor moves little:
tile sizes change what the model sees. Between structures it moves a lot, and it is exactly what
makes the draft-driven search favour a structure that measures slow (depthwise on this CPU: the
draft's favourite structures ran 1.5-2x slower than ones it ranked low). So each structure's score
is divided by the median factor of its measured programs, and a structure not yet measured by the
median over the structures that were (which leaves their order among themselves as it was).
In bench/tune.py (6 workloads x 3 seeds, 64 trials, against the same XGB runs) this took the
best-latency ratio to XGB from 0.91 / 0.88 to 0.99 / 0.95 at 32 / 64 trials; dense gained most
(0.61-0.78 -> 0.98-1.09), depthwise stayed behind XGB.

The structures measured are those the draft rated highest, so their median factor carries its
over-rating of them: in a 256-trial run of the grouped convolution, the median log factor of the 47
structures ours measured was 1.56 against 0.45 over the 80 that XGB's (at first random) order
measured, where the fastest structures had -0.8 and -1.3; divided by the median, those stayed
below the draft's favourites and were never measured. ``least`` divides an unmeasured structure by
the smallest measured factor instead: it ranks as if the draft over-rated it no more than the
measured structure it over-rated least. It measured 2-3x as many structures and found those of
layer norm and grouped conv, but lost depthwise: over bench/tune.py's 8 kernels x 2 seeds it was no
better (XGB / ours 0.960 against 0.970 at 256 trials), so the median is the default.
"""

from __future__ import annotations

import numpy as np


# what a structure not measured yet is divided by: the median factor of the measured structures, or
# the least of them (the structure the draft over-rated least)
_UNMEASURED_FACTOR = {"median": np.median, "least": np.min}
UNMEASURED = tuple(_UNMEASURED_FACTOR)


class StructureCalibration:
    def __init__(self, unmeasured: str = "median") -> None:
        if unmeasured not in UNMEASURED:
            raise ValueError(f"unmeasured must be one of {UNMEASURED}, not {unmeasured!r}")
        self._unmeasured_factor = _UNMEASURED_FACTOR[unmeasured]
        self._log_factors: dict[int, list[float]] = {}
        self._per_structure: dict[int, float] = {}
        self._unmeasured = 0.0

    def add(self, structures: list[int], scores: list[float], seconds: list[float]) -> None:
        """Measured programs: their structures, draft scores (1/s) and measured seconds; failed or
        unscored ones (not finite, not positive) are left out."""
        for structure, score, secs in zip(structures, scores, seconds):
            if np.isfinite(secs) and secs > 0 and np.isfinite(score) and score > 0:
                self._log_factors.setdefault(int(structure), []).append(float(np.log(secs * score)))
        if self._log_factors:
            self._per_structure = {s: float(np.median(v)) for s, v in self._log_factors.items()}
            self._unmeasured = float(self._unmeasured_factor(list(self._per_structure.values())))

    def __len__(self) -> int:
        """Structures measured."""
        return len(self._per_structure)

    def scores(self, structures: list[int], scores: np.ndarray) -> np.ndarray:
        """The draft scores, each divided by its structure's factor."""
        if not self._per_structure:
            return np.asarray(scores, dtype=np.float64)
        factor = np.array([self._per_structure.get(int(s), self._unmeasured) for s in structures])
        return np.asarray(scores, dtype=np.float64) * np.exp(-factor)
