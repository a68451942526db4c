"""One vector per transform step, for the TLP-style baseline that reads schedules, not programs.

Each step becomes: a one-hot of its code, a one-hot of its annotation (AN) and of its
memory scope (CHR/CHW), and up to ``N_NUMERIC`` numeric arguments squashed with a signed
log2 so that loop lengths of 1 and 1024 sit on one scale. Sequences are cut or zero-padded
to ``MAX_STEPS``; a padding row is all zeros (its code one-hot is empty), which the model masks.
"""

from __future__ import annotations

import numpy as np

from .steps import STEP_CODES, Annotation

MAX_STEPS = 64
N_NUMERIC = 8
_SCOPES = ("global", "shared", "local")
_CODE = {c: i for i, c in enumerate(STEP_CODES)}
_ANN0 = len(STEP_CODES)
_SCOPE0 = _ANN0 + len(Annotation)
_NUM0 = _SCOPE0 + len(_SCOPES)
STEP_DIM = _NUM0 + N_NUMERIC


def _numeric(step: list) -> list:
    """The step's numbers in argument order, lists flattened (SP lengths, RE order, ...)."""
    out: list = []
    for a in step[1:]:
        if isinstance(a, list):
            out.extend(x for x in a if isinstance(x, (int, float)))
        elif isinstance(a, (int, float)) and not isinstance(a, bool):
            out.append(a)
        elif isinstance(a, str) and "$" in a:  # PR "auto_unroll_max_step$512"
            tail = a.rpartition("$")[2]
            out.append(int(tail) if tail.isdigit() else 0)
    return out


def step_vectors(raw_steps: tuple[list, ...]) -> np.ndarray:
    """[MAX_STEPS, STEP_DIM] float32 from a record's raw steps (as ``Record.raw_steps``)."""
    out = np.zeros((MAX_STEPS, STEP_DIM), dtype=np.float32)
    for row, step in zip(out, raw_steps[:MAX_STEPS]):
        code = step[0]
        row[_CODE[code]] = 1.0
        if code == "AN":
            row[_ANN0 + int(step[3])] = 1.0
        elif code in ("CHR", "CHW") and step[2] in _SCOPES:
            row[_SCOPE0 + _SCOPES.index(step[2])] = 1.0
        nums = np.asarray(_numeric(step)[:N_NUMERIC], dtype=np.float64)
        row[_NUM0:_NUM0 + len(nums)] = np.sign(nums) * np.log2(1.0 + np.abs(nums))
    return out
