"""The one entry point: a scheduled TIR PrimFunc -> every feature the models use."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tvm import s_tir, tirx

from .dataflow import dataflow_pattern
from .devices import DeviceConstants, device_for
from .draft_score import analytic_score, analytic_scores
from .op_tag import op_tag_embedding
from .per_store import per_store_features
from .regions import lowered_as_per_store_feature
from .schema import FEATURE_SCHEMA_VERSION
from .symbols import psa_symbols
from .tir_walk import WalkResult, walk


@dataclass(frozen=True)
class ProgramFeatures:
    statements: np.ndarray  # [n, 174] float32: 164 per-store features + 10 op-tag one-hot
    dataflow: np.ndarray  # [8, 23] float32
    symbols: np.ndarray  # [n, 11] float32, SYMBOL_COLUMNS
    draft_score: float  # analytic throughput estimate, 1/s, higher is faster
    schema_version: int = FEATURE_SCHEMA_VERSION


class FeatureAlignmentError(ValueError):
    """The TIR walk and PerStoreFeature disagree on the statements of a program."""


def _aligned_walk(func: tirx.PrimFunc, n_rows: int, walked: WalkResult | None = None) -> WalkResult:
    walked = walked or walk(func)
    if len(walked.rows) != n_rows:
        # PerStoreFeature's preprocessing can add statements (cross-thread reduction buffers) or
        # drop some (weight layout rewrites), which the walk then sees as the extractor does
        walked = walk(lowered_as_per_store_feature(func, simplify=False))
    if len(walked.rows) != n_rows:
        raise FeatureAlignmentError(
            f"PerStoreFeature found {n_rows} statements, the TIR walk {len(walked.rows)}")
    return walked


def _func(program: tirx.PrimFunc | s_tir.Schedule) -> tirx.PrimFunc:
    return program.mod["main"] if isinstance(program, s_tir.Schedule) else program


def featurize_prim_func(program: tirx.PrimFunc | s_tir.Schedule, target_kind: str,
                        device: str | DeviceConstants | None = None, walked: WalkResult | None = None) -> ProgramFeatures:
    """Features of one scheduled PrimFunc (or the Schedule holding it, which is faster) for target
    kind "cuda" (or another GPU kind) or "llvm".

    device: a name in devices.DEVICES or explicit DeviceConstants; defaults to devices.DEFAULT_DEVICE.
    Only the draft score depends on it. walked: walk() of the program when the caller has it (the
    tuning draft stage), used unless PerStoreFeature sees other statements.
    """
    dev = device_for(target_kind, device)
    per_store = per_store_features(program, target_kind)
    walked = _aligned_walk(_func(program), len(per_store), walked)
    symbols = psa_symbols(walked.rows, dev.is_gpu)
    return ProgramFeatures(
        statements=np.concatenate([per_store, op_tag_embedding(walked.rows)], axis=1),
        dataflow=dataflow_pattern(walked, per_store, symbols),
        symbols=symbols.values.astype(np.float32),
        draft_score=analytic_score(symbols, dev),
    )


@dataclass(frozen=True)
class DraftFeatures:
    symbols: np.ndarray  # [n, 11] float32, SYMBOL_COLUMNS
    draft_score: float
    walked: WalkResult  # kept for featurize_prim_func when the program is verified


def psa_batch(programs: list[tirx.PrimFunc | s_tir.Schedule], target_kind: str,
              device: str | DeviceConstants | None = None) -> list[DraftFeatures | None]:
    """The draft model's inputs alone, ~5-10x cheaper than featurize_prim_func (no PerStoreFeature);
    None for a program the walk fails on. The scores are computed for all programs in one pass.

    The walk is not checked against PerStoreFeature's statement count, so on the rare program where
    featurize_prim_func has to walk the lowered form the symbols here describe the scheduled form.
    """
    dev = device_for(target_kind, device)
    walked: list[WalkResult | None] = []
    for program in programs:
        try:
            walked.append(walk(_func(program)))
        except Exception:  # noqa: BLE001 - TVM errors on one program must not end a batch
            walked.append(None)
    ok = [w for w in walked if w is not None]
    symbols = [psa_symbols(w.rows, dev.is_gpu) for w in ok]
    scores = iter(zip(symbols, analytic_scores(symbols, dev)))
    out: list[DraftFeatures | None] = []
    for w in walked:
        if w is None:
            out.append(None)
        else:
            sym, score = next(scores)
            out.append(DraftFeatures(sym.values.astype(np.float32), float(score), w))
    return out
