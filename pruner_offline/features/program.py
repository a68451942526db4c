"""The one path from a source's programs to their features, shared by featurize, adapt and follow."""

from __future__ import annotations

from typing import Union

import numpy as np

from ..sources.base import SourceProgram
from ..devices import DeviceConstants
from .extract import ProgramFeatures, featurize_many
from .schema import FEATURE_SCHEMA_VERSION


def programs_features(progs: list[SourceProgram], target_kind: str, device: DeviceConstants,
                      schema: int = FEATURE_SCHEMA_VERSION) -> list[Union[ProgramFeatures, str]]:
    """Each program's features of feature schema ``schema``, or why it has none (it could not be
    scheduled, or extraction failed); the programs' per-store features are extracted in one batch."""
    scheduled = featurize_many([p.func for p in progs if p.func is not None], target_kind, device, schema=schema)
    got = iter(scheduled)
    out: list[Union[ProgramFeatures, str]] = []
    for prog in progs:
        if prog.func is None:
            out.append(prog.reason or "not scheduled")
            continue
        feats = next(got)
        if isinstance(feats, Exception):
            out.append(f"features: {type(feats).__name__}: {feats}")
        elif not all(np.isfinite(x).all() for x in (feats.statements, feats.symbols, feats.dataflow, feats.draft_score)):
            out.append("features: not finite (NaN or infinite values)")
        else:
            out.append(feats)
    return out


def program_features(prog: SourceProgram, target_kind: str, device: DeviceConstants,
                     schema: int = FEATURE_SCHEMA_VERSION) -> Union[ProgramFeatures, str]:
    """``programs_features`` of one program."""
    return programs_features([prog], target_kind, device, schema)[0]
