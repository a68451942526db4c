"""Frames of Python's frozen modules (its import machinery), made known to `inspect`'s module cache.

Every TVMScript `@T.prim_func` decorator calls `inspect.stack()`, which asks `inspect.getmodule`
for the module of every frame on the stack. Frames of frozen modules (the import machinery,
`<frozen importlib._bootstrap>`, and `<frozen runpy>` under `python -m`) name no file, so that
lookup never hits inspect's cache and scans all of `sys.modules` again for each of them.
MetaSchedule's TuneContext (and its default build function) first imports
`tvm.s_tir.tensor_intrin`, whose 496 decorators run inside imports: with torch and Lightning loaded
(~4,200 modules) that import took 65.2 s here, and 8.4 s with these entries (back to back); the
test that tunes through `tune_tir` went from 95 s to 17 s.

The entries map each frozen file name to the module it is, which is what inspect would find if the
module had a file; where inspect asks for those frames' source, there is none either way.
"""

from __future__ import annotations

import inspect
import sys


def register_frozen_frames() -> None:
    """Idempotent; does nothing on a Python whose inspect keeps no such cache."""
    cache = getattr(inspect, "modulesbyfile", None)
    if not isinstance(cache, dict):
        return
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", None)
        if isinstance(name, str) and getattr(getattr(module, "__spec__", None), "origin", None) == "frozen":
            cache.setdefault(f"<frozen {name}>", name)
