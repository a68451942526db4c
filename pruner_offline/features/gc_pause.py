"""Python's cyclic garbage collector held off while a batch of programs is featurized.

A tuning process holds some 10^5-10^6 Python objects (TVM's and torch's modules, MetaSchedule's),
and each full collection walks all of them (~0.1 s). Reading the loops of a population allocates
enough small tuples to start one every few hundred programs: in a conv2d tuning run that was most
of the draft stage's CPU time (~0.4 ms per program against ~0.07 ms for the reading itself). The
featurization code makes no reference cycles, so reference counting frees what it allocates, and
the collector runs again once the batch is done.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
