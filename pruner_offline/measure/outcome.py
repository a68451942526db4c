"""Why a program failed to build or run, in a word a summary can count by, from the message
MetaSchedule's result carries."""

from __future__ import annotations

from typing import Optional

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
