"""Errors a user can act on, and the report of everything else.

A ``BadInput`` names what to fix (``FILE:LINE: reason``, ``STORE: ARRAY: reason``, a bad argument):
the CLI prints it as one line and exits 2. Any other exception reaching the CLI is a bug in this
toolkit: its traceback goes to a log file, and the user is told where, not shown it.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import traceback
from pathlib import Path


class BadInput(ValueError):
    """An input (file, line, array, argument) the user can fix; the message says where."""

    def __str__(self) -> str:
        # Subclasses may also inherit KeyError, whose str() would quote the message.
        return str(self.args[0]) if self.args else ""


def crash_log(exc: BaseException) -> Path:
    """Write ``exc``'s traceback to a new log file and return its path."""
    fd, name = tempfile.mkstemp(prefix=f"pruner-train-crash-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".log")
    with os.fdopen(fd, "w") as f:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=f)
    return Path(name)


def _finite(obj: object) -> object:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps(obj: object, **kwargs) -> str:
    """JSON that every parser accepts: NaN and infinities (no measurement, no value) become null."""
    return json.dumps(_finite(obj), allow_nan=False, **kwargs)
