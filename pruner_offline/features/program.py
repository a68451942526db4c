"""The one path from a source's program to its features, shared by featurize, adapt and follow."""

from __future__ import annotations

from typing import Union

import numpy as np

from ..sources.base import SourceProgram
from .devices import DeviceConstants
from .extract import ProgramFeatures, featurize_prim_func


def program_features(prog: SourceProgram, target_kind: str, device: DeviceConstants) -> Union[ProgramFeatures, str]:
    """The program's features, or why it has none (it could not be scheduled, or extraction failed)."""
    if prog.func is None:
        return prog.reason or "not scheduled"
    try:
        feats = featurize_prim_func(prog.func, target_kind, device=device)
    except Exception as exc:  # noqa: BLE001 - TVM and alignment errors: one program must not end a run
        return f"features: {type(exc).__name__}: {exc}"
    if not all(np.isfinite(x).all() for x in (feats.statements, feats.symbols, feats.dataflow, feats.draft_score)):
        return "features: not finite (NaN or infinite values)"
    return feats
