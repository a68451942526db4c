"""What a measurement gave: why a program failed to build or run, in a word a summary can count
by, from the message MetaSchedule's result carries; and the latency of one that ran."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

if TYPE_CHECKING:
    from tvm.s_tir.meta_schedule.runner import RunnerResult

# in the order they are tested: the first that matches names the failure
_REASONS = (
    ("build", "timeout", "build_timeout"),
    ("build", "worker died", "build_crash"),
    ("build", "", "build_error"),
    ("run", "timeout", "run_timeout"),
    ("run", "worker died", "run_crash"),
    ("run", "rpc", "rpc_error"),
    ("run", "", "run_error"),
)

REASONS = tuple(r for _, _, r in _REASONS)


def failure_reason(build_error: Optional[str], run_error: Optional[str]) -> Optional[str]:
    """None for a program that built and ran, else one of REASONS."""
    stage, message = ("build", build_error) if build_error is not None else ("run", run_error)
    if message is None:
        return None
    low = message.lower()
    return next(reason for s, word, reason in _REASONS if s == stage and word in low)


def measured_seconds(result: RunnerResult) -> float:
    """A candidate's latency, the mean of its runs; infinite when it failed to build or run."""
    if result.error_msg is None and result.run_secs:
        return float(np.mean([float(s) for s in result.run_secs]))
    return float("inf")
