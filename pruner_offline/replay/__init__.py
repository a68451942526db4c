"""Ansor (TenSet) records replayed as TIR schedule primitives on the compute rebuilt in today's TVM."""

from .api import ReplayResult, replay_record, replay_steps
from .compute import ComputeBuildError, build_prim_func
from ..targets import record_target

__all__ = ["ReplayResult", "replay_record", "replay_steps", "build_prim_func", "ComputeBuildError", "record_target"]
