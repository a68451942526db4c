"""A TuneContext for one workload, built without importing the tensor intrinsics.

The Python TuneContext constructor imports `tvm.s_tir.tensor_intrin` (~25 s) before anything else;
the FFI constructor underneath needs none of it for spaces that do not tensorize (see build.py).
"""

from __future__ import annotations

import logging

import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule import _ffi_api
from tvm.s_tir.meta_schedule.logging import get_logging_func
from tvm.s_tir.meta_schedule.utils import fork_seed


def make_context(mod: tvm.IRModule, target: tvm.target.Target, *, num_threads: int, seed: int | None,
                 logger: logging.Logger, population_size: int = 512, task_name: str = "main",
                 strategy: ms.search_strategy.SearchStrategy | None = None) -> ms.TuneContext:
    """seed None: MetaSchedule picks one. population_size: the evolutionary search's population
    (512 by default, as MetaSchedule's); each generation asks the cost model to score it.
    strategy: default MetaSchedule's evolutionary search with that population."""
    # On sm_70 and newer MetaSchedule picks the tensor-core rules by default, which need the
    # intrinsics registered; float32 programs never tensorize, so the plain CUDA rules are the space.
    kind = "cuda" if target.kind.name == "cuda" else None
    space = ms.space_generator.PostOrderApply(sch_rules=kind or "from-target", postprocs=kind or "from-target",
                                              mutator_probs=kind or "from-target")
    strategy = strategy or ms.search_strategy.EvolutionarySearch(population_size=population_size)
    context = _ffi_api.TuneContext(mod, target, space, strategy, task_name, num_threads,
                                   fork_seed(seed, n=1)[0], get_logging_func(logger))
    _ffi_api.TuneContextInitialize(context)
    return context
