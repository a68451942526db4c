"""The one entry point: a scheduled TIR PrimFunc -> every feature the models use."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tvm import s_tir, tirx

from .dataflow import dataflow_pattern
from ..devices import DeviceConstants, device_for
from .draft_score import analytic_score
from .native_walk import fast_walk, walks
from .op_tag import op_tag_embedding
from .per_store import per_store_features_of_many
from .per_store_native import NativeFeaturesUnavailable, per_store_rows
from .regions import lowered_as_per_store_feature
from .schema import EXTRACTABLE_SCHEMAS, FEATURE_SCHEMA_VERSION
from .symbols import psa_symbols
from .tir_walk import WalkResult


@dataclass(frozen=True)
class ProgramFeatures:
    statements: np.ndarray  # [n, 174] float32: 164 per-store features (by the schema's extractor) + 10 op-tag one-hot
    dataflow: np.ndarray  # [8, 23] float32
    symbols: np.ndarray  # [n, 11] float32, SYMBOL_COLUMNS
    draft_score: float  # analytic throughput estimate, 1/s, higher is faster
    schema_version: int = FEATURE_SCHEMA_VERSION


class FeatureAlignmentError(ValueError):
    """The TIR walk and PerStoreFeature disagree on the statements of a program."""


def _aligned_walk(func: tirx.PrimFunc, n_rows: int, walked: WalkResult | None = None) -> WalkResult:
    """walked: the program's walk when a caller already made it (natively, in a batch)."""
    if walked is None:
        walked = fast_walk(func)
    if len(walked.rows) != n_rows:
        # PerStoreFeature's preprocessing can add statements (cross-thread reduction buffers) or
        # drop some (weight layout rewrites), which the walk then sees as the extractor does
        walked = fast_walk(lowered_as_per_store_feature(func, simplify=False))
    if len(walked.rows) != n_rows:
        raise FeatureAlignmentError(
            f"PerStoreFeature found {n_rows} statements, the TIR walk {len(walked.rows)}")
    return walked


def per_store_of_many(schedules: list[s_tir.Schedule], target_kind: str, is_gpu: bool,
                      schema: int = FEATURE_SCHEMA_VERSION, num_threads: int = 1) -> list[np.ndarray | None]:
    """The 164 per-store columns of each program as feature schema ``schema`` defines them: 3, the
    package's own extractor (per_store_native.py; None for a program it cannot read); 2,
    MetaSchedule's PerStoreFeature (one program it cannot read fails the call)."""
    if schema not in EXTRACTABLE_SCHEMAS:
        raise ValueError(f"feature schema {schema} is not one this version extracts ({EXTRACTABLE_SCHEMAS})")
    if schema == 2:
        return per_store_features_of_many(schedules, target_kind, num_threads)
    return per_store_rows([_main_or_none(sch) for sch in schedules], is_gpu)


def _main_or_none(sch: s_tir.Schedule) -> tirx.PrimFunc | None:
    try:
        return sch.mod["main"]
    except Exception:  # noqa: BLE001 - featurize_prim_func reports it for this program alone
        return None


def _func(program: tirx.PrimFunc | s_tir.Schedule) -> tirx.PrimFunc:
    return program.mod["main"] if isinstance(program, s_tir.Schedule) else program


def featurize_prim_func(program: tirx.PrimFunc | s_tir.Schedule, target_kind: str,
                        device: str | DeviceConstants | None = None,
                        per_store: np.ndarray | None = None, walked: WalkResult | None = None,
                        schema: int = FEATURE_SCHEMA_VERSION) -> ProgramFeatures:
    """Features of one scheduled PrimFunc (or the Schedule holding it, which is faster) for target
    kind "cuda" (or another GPU kind) or "llvm", as feature schema ``schema`` defines them.

    device: a name in devices.DEVICES or explicit DeviceConstants; defaults to devices.DEFAULT_DEVICE.
    Only the draft score depends on it.
    per_store, walked: the program's per-store columns and ``tir_walk.walk`` when a caller
    already made them in a batch.
    """
    dev = device_for(target_kind, device)
    if per_store is None:
        sch = program if isinstance(program, s_tir.Schedule) else s_tir.Schedule(program)
        per_store = per_store_of_many([sch], target_kind, dev.is_gpu, schema)[0]
        if per_store is None:
            raise FeatureAlignmentError("the per-store extractor could not read the program")
    walked = _aligned_walk(_func(program), len(per_store), walked)
    symbols = psa_symbols(walked.rows, dev.is_gpu)
    return ProgramFeatures(
        statements=np.concatenate([per_store, op_tag_embedding(walked.rows)], axis=1),
        dataflow=dataflow_pattern(walked, per_store, symbols),
        symbols=symbols.values.astype(np.float32),
        draft_score=analytic_score(symbols, dev),
        schema_version=schema,
    )


def featurize_many(programs: list[tirx.PrimFunc | s_tir.Schedule], target_kind: str,
                   device: str | DeviceConstants | None = None,
                   num_threads: int = 1, schema: int = FEATURE_SCHEMA_VERSION) -> list[ProgramFeatures | Exception]:
    """``featurize_prim_func`` of each program, or the exception it raised; the native per-store
    part of all of them in one call (schema 2: on ``num_threads`` threads): each call has a fixed
    cost, and featurize with one call per 64 programs ran 1.36-1.40x faster on tenset-mini's cuda
    records than with one per program (bench/featurize.py). A program the batch cannot read fails
    the batch, and then each is extracted alone, so that only its own failure is reported."""
    schedules = [p if isinstance(p, s_tir.Schedule) else s_tir.Schedule(p) for p in programs]
    dev = device_for(target_kind, device)
    try:
        rows = per_store_of_many(schedules, target_kind, dev.is_gpu, schema, num_threads)
    except (ValueError, NativeFeaturesUnavailable):  # no program of the batch would fare better alone
        raise
    except Exception:  # noqa: BLE001 - retried one by one below
        rows = [None] * len(programs)
    # natively where it built; a program it cannot read is walked in Python, which says why
    walked = walks([_main_or_none(sch) for sch in schedules]) or [None] * len(schedules)
    out: list[ProgramFeatures | Exception] = []
    for sch, per_store, program_walk in zip(schedules, rows, walked):
        try:
            out.append(featurize_prim_func(sch, target_kind, dev, per_store=per_store, walked=program_walk,
                                           schema=schema))
        except Exception as exc:  # noqa: BLE001 - TVM and alignment errors: one program must not end a run
            out.append(exc)
    return out
