"""Random candidates of a workload's MetaSchedule design space, postprocessed as the search's are:
programs to time or test the cost models on without a tuning run."""

from __future__ import annotations

import logging

import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.schedule import Trace

from ...targets import tuning_target
from ..context import make_context


def sample_candidates(mod: tvm.IRModule, n: int, *, target_kind: str = "llvm", num_cores: int = 2,
                      seed: int = 0) -> tuple[ms.TuneContext, list[ms.MeasureCandidate]]:
    """The workload's TuneContext and n candidates, each a design space with fresh random decisions;
    candidates a postprocessor rejects are skipped, as the search skips them."""
    context = make_context(mod, tuning_target(target_kind, num_cores), num_threads=1, seed=seed,
                           logger=logging.getLogger("pruner_offline.sampling"))
    spaces = context.generate_design_space()
    out: list[ms.MeasureCandidate] = []
    attempt = seed
    while len(out) < n:
        attempt += 1
        sch = s_tir.Schedule(mod, seed=attempt)
        Trace(spaces[attempt % len(spaces)].trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
        if all(p.apply(sch) for p in context.space_generator.postprocs):
            out.append(ms.MeasureCandidate(sch, []))
    return context, out
