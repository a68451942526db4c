"""Programs of one task the way TenSet sampled its dataset: some drawn at random from the design
space, the rest from an evolutionary search driven by a random cost model (MetaSchedule's
EvolutionarySearch with RandomModel), whose populations start from the best programs measured so
far. So the set spans bad, typical and good programs, where a search driven by a real model would
measure mostly good ones. No program is handed out twice: each is known by the structural hash
of its scheduled module, and the hashes of programs measured by earlier runs are given in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.schedule import Trace

from ..tuning.context import make_context

# the search's own trial count would end it; the driver decides when a task is done
_UNBOUNDED_TRIALS = 1 << 30


def program_hash(sch: s_tir.Schedule) -> int:
    return int(tvm_ffi.structural_hash(sch.mod))


@dataclass
class SampleCounts:
    random: int = 0
    evolved: int = 0
    duplicates: int = 0  # programs drawn again, not handed out
    rejected: int = 0  # random draws a postprocessor refused (as the search refuses them)


class TaskSampler:
    def __init__(self, mod: tvm.IRModule, target: tvm.target.Target, database: ms.database.Database, *,
                 seed: int, random_fraction: float, batch: int, population_size: int, num_threads: int,
                 seen: set[int]):
        self.search = ms.search_strategy.EvolutionarySearch(population_size=population_size)
        self.context = make_context(mod, target, num_threads=num_threads, seed=seed, strategy=self.search,
                                    population_size=population_size,
                                    logger=logging.getLogger("pruner_offline.collect"))
        self.spaces = self.context.generate_design_space()
        self.search.pre_tuning(_UNBOUNDED_TRIALS, batch, self.spaces, database,
                               ms.cost_model.RandomModel(seed=seed))
        self.rng = np.random.default_rng(seed)
        self.random_fraction = random_fraction
        self.seen = seen
        self.counts = SampleCounts()

    def _new(self, sch: s_tir.Schedule) -> bool:
        key = program_hash(sch)
        if key in self.seen:
            self.counts.duplicates += 1
            return False
        self.seen.add(key)
        return True

    def _random(self, n: int) -> list[ms.MeasureCandidate]:
        out: list[ms.MeasureCandidate] = []
        for _ in range(4 * n):  # a small space runs out: the search's half still tries
            if len(out) == n:
                break
            space = self.spaces[int(self.rng.integers(len(self.spaces)))]
            sch = s_tir.Schedule(self.context.mod, seed=int(self.rng.integers(1, 2**31 - 1)))
            try:
                Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
                # as MetaSchedule's own sampling marks it: a search that starts from this record
                # replays it without what follows the mark, then runs the postprocessors again
                sch.enter_postproc()
                ok = all(p.apply(sch) for p in self.context.space_generator.postprocs)
            except tvm.TVMError:
                ok = False
            if not ok:
                self.counts.rejected += 1
            elif self._new(sch):
                out.append(ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
        self.counts.random += len(out)
        return out

    def _evolved(self, n: int) -> list[ms.MeasureCandidate]:
        found = self.search.generate_measure_candidates() or []
        out = [c for c in found if self._new(c.sch)][:n]
        self.counts.evolved += len(out)
        return out

    def next_batch(self, n: int) -> list[ms.MeasureCandidate]:
        """Up to n programs never handed out before; fewer (or none) when the space runs dry."""
        want_random = int(self.rng.binomial(n, self.random_fraction))
        batch = self._random(want_random) if want_random else []
        batch += self._evolved(n - len(batch))
        if len(batch) < n:  # the search found too few new ones: random draws fill in
            batch += self._random(n - len(batch))
        return batch

    def notify(self, candidates: list[ms.MeasureCandidate], results: list[ms.runner.RunnerResult]) -> None:
        self.search.notify_runner_results(candidates, results)

    def close(self) -> None:
        self.search.post_tuning()
