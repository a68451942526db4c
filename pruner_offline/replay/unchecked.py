"""A Schedule whose primitives skip TVM's Python argument type checker.

``tvm.s_tir.Schedule`` wraps every primitive in ``type_checked``, which binds the call's
signature and walks the type hints on every call: profiled on tenset-mini CUDA records it is
~90% of replay time, more than the schedule primitives themselves. The replay builds every
argument in code, so it calls the wrapped functions directly (``functools.wraps`` keeps them
as ``__wrapped__``); everything else is the ordinary Schedule.
"""

from __future__ import annotations

import functools
from typing import Any

from tvm import s_tir


class UncheckedSchedule:
    def __init__(self, func=None, *, schedule: s_tir.Schedule | None = None):
        """A fresh schedule of ``func``, or ``schedule`` itself when given."""
        if schedule is not None:
            self.schedule = schedule
            return
        # construction is type-checked too (~40% of building a Schedule)
        self.schedule = s_tir.Schedule.__new__(s_tir.Schedule)
        s_tir.Schedule.__init__.__wrapped__(self.schedule, func, debug_mask=0)

    def copy(self) -> "UncheckedSchedule":
        """An independent copy in which this schedule's block and loop handles stay valid."""
        return UncheckedSchedule(schedule=self.schedule.copy())

    def __getattr__(self, name: str) -> Any:
        raw = getattr(getattr(s_tir.Schedule, name, None), "__wrapped__", None)
        if raw is None:
            return getattr(self.schedule, name)
        bound = functools.partial(raw, self.schedule)
        # kept: the next call finds it without __getattr__ (a cuda record makes ~110 such calls)
        setattr(self, name, bound)
        return bound
