"""What a tuning run tells the console, and what it keeps in its work directory."""

from __future__ import annotations

import logging
from pathlib import Path

from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir

_META_SCHEDULE = "tvm.s_tir.meta_schedule"


def tuning_loggers(work_dir: str | Path, task_names: list[str], quiet: bool = False) -> list[logging.Logger]:
    """MetaSchedule's per-task loggers of a run. Everything, DEBUG included, goes to
    ``work_dir/logs``; the console gets its progress (INFO: a table per measured batch), or with
    ``quiet`` only warnings. MetaSchedule sizes its console handler by the level its root logger
    has when the loggers are made, DEBUG when unset: XGB's every boosting round on the console."""
    logging.getLogger(_META_SCHEDULE).setLevel(logging.WARNING if quiet else logging.INFO)
    return get_loggers_from_work_dir(str(work_dir), task_names)


def run_logger() -> logging.Logger:
    """The logger of the whole run, once tuning_loggers has made them: the console (as sized
    there) and the task scheduler's log in ``work_dir/logs``."""
    return logging.getLogger(_META_SCHEDULE)
