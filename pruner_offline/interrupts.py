"""How a command ends when its user (or a batch system) stops it.

Ctrl-C raises KeyboardInterrupt, which the CLI turns into one line and exit 130; SIGTERM (a batch
system's preemption, `kill`) ended the process without a word, and Lightning took it as a request to
stop training early and return as if done. ``terminate_as_interrupt`` makes SIGTERM the same
interrupt, with exit 143 (128 + 15, what a shell reports for it).

A tuning run is different: MetaSchedule's loop runs in C++ and calls back into Python, and an
exception raised in a callback while TVM's worker threads and process pools are live ended in a
segfault or a hang on their shutdown (a fuzzing pass saw both). Everything a run has measured is
already in its database, appended record by record, and the same command continues from it
(tuning/run/resume.py), so ``exit_at_once`` leaves without unwinding through TVM.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from typing import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM, told like Ctrl-C."""

    exit_code = 128 + signal.SIGTERM


def exit_code(interrupt: KeyboardInterrupt) -> int:
    return getattr(interrupt, "exit_code", 128 + signal.SIGINT)


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


@contextmanager
def _handlers(handler, *signums: int) -> Iterator[None]:
    # signal handlers belong to the main thread; a command run from another thread keeps Python's
    try:
        before = {s: signal.signal(s, handler) for s in signums}
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        for s, old in before.items():
            signal.signal(s, old)


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    with _handlers(_raise_terminated, signal.SIGTERM):
        yield


@contextmanager
def exit_at_once(message: str) -> Iterator[None]:
    """On SIGINT or SIGTERM: print ``message`` and end the process with 130 or 143, at once."""

    def leave(signum, frame) -> None:
        print(f"pruner-train: interrupted; {message}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(128 + signum)

    with _handlers(leave, signal.SIGINT, signal.SIGTERM):
        yield
