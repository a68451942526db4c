"""Errors a user can act on, and the report of everything else; our warnings, told the same way.

A ``BadInput`` names what to fix (``FILE:LINE: reason``, ``STORE: ARRAY: reason``, a bad argument):
the CLI prints it as one line and exits 2. Any other exception reaching the CLI is a bug in this
toolkit: its traceback goes to a log file, and the user is told where, not shown it.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
import warnings
from contextlib import contextmanager
from pathlib import Path


class BadInput(ValueError):
    """An input (file, line, array, argument) the user can fix; the message says where."""

    def __str__(self) -> str:
        # Subclasses may also inherit KeyError, whose str() would quote the message.
        return str(self.args[0]) if self.args else ""


def why_not_loaded(exc: BaseException) -> str:
    """The reason ``torch.load(weights_only=True)`` refused a file, in one line. torch's own message
    advises loading again with ``weights_only=False`` or allowing the object it met, which would run
    whatever code an untrusted file holds; that advice is left out and the unpickler's finding kept."""
    text = str(exc)
    needs = re.search(r"GLOBAL ([\w.]+)", text)
    if needs:
        return (f"the safe unpickler refused it: it would import and call {needs.group(1)}, which a model "
                "or state file of ours never needs")
    if "weights_only" in text:
        after = text.partition("WeightsUnpickler error:")[2] or text
        advice = ("weights_only", "torch.load", "documentation", "Please file an issue")
        finding = next((ln.strip() for ln in after.splitlines() if ln.strip() and not any(a in ln for a in advice)), "")
        return (f"the safe unpickler refused it: {finding[:200] or 'not a pickle it can read'}; a damaged "
                "file or not one of ours")
    first = text.splitlines()[0][:200] if text.strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


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


_PACKAGE_DIR = str(Path(__file__).resolve().parent) + os.sep  # not a sibling named pruner_offline_*


@contextmanager
def user_facing_warnings():
    """Our own warnings told like our errors, one line each: Python's form adds the file and line
    of the call that warned, which is ours, not the user's to look at. Other libraries' warnings
    keep that form, where it says which library spoke."""
    default = warnings.showwarning

    def say(message, category, filename, lineno, file=None, line=None):
        if str(filename).startswith(_PACKAGE_DIR):
            print(f"pruner-train: warning: {message}", file=sys.stderr if file is None else file)
        else:
            default(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.showwarning = say
        yield
