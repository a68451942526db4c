"""The builder of tuning runs and of collect: MetaSchedule's LocalBuilder on workers kept for the run.

MetaSchedule's default build function imports `tvm.s_tir.tensor_intrin` (~25 s of TVMScript parsing)
in every worker. The intrinsics only matter to candidates that tensorize, and those can only come
from schedule rules that need the intrinsics registered in the tuning process, which this toolkit
never imports, so the build below skips the import. Workers unpickle `_build_and_export` by
reference, which imports only this module (TVM, no torch). CUDA programs are built with nvcc for the
target's arch, which needs no GPU here: the runner may measure them on a remote one.

MetaSchedule's LocalBuilder also starts fresh worker processes for every batch (and once more for
its start-up check), and each of them imports TVM first: ~4.5 s of CPU on a 2-core machine, where
building a batch of 16 CPU candidates takes ~1-3 s. PooledBuilder keeps its workers for the run, as
MetaSchedule's LocalRunner does; a worker is replaced when a build times out or kills it.
"""

from __future__ import annotations

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind



def build_module(mod: tvm.IRModule, target: tvm.target.Target, _params) -> tvm.runtime.Module:
    # The layout-rewrite blocks only describe a weight transform done ahead of time; the measured
    # kernel must not contain them (MetaSchedule's own build does the same).
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm.driver.build(mod, target=target)


def _build_and_export(job: tuple[tvm.IRModule, tvm.target.Target]) -> str:
    """In a worker: the path of the built module, exported as MetaSchedule's runners load it."""
    export = tvm.get_global_func("s_tir.meta_schedule.builder.default_export")
    return export(build_module(*job, None))


def _started() -> None:
    """In a worker: nothing; submitted once per worker so that its TVM import starts early."""


@derived_object
class PooledBuilder(PyBuilder):
    """MetaSchedule's LocalBuilder with `build_module`, on `max_workers` processes kept between
    batches. Parameters of a BuilderInput are not passed on: tuning builds kernels without bound
    weights. ``close()`` ends the workers (they also end with the builder)."""

    def __init__(self, max_workers: int, timeout_sec: float):
        super().__init__()
        self.timeout_sec = timeout_sec
        self.pool = PopenPoolExecutor(max_workers=max_workers, timeout=timeout_sec)
        # the workers import TVM while the task scheduler prepares the first batch
        for _ in range(max_workers):
            self.pool.submit(_started)

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        jobs = [(b.mod, b.target) for b in build_inputs]
        results = []
        for done in self.pool.map_with_error_catching(_build_and_export, jobs):
            if done.status == StatusKind.COMPLETE:
                results.append(BuilderResult(done.value, None))
            elif done.status == StatusKind.TIMEOUT:
                results.append(BuilderResult(None, f"PooledBuilder: timeout, killed after {self.timeout_sec} seconds"))
            elif isinstance(done.value, ChildProcessError):  # a crash inside TVM or LLVM: the pool starts another
                results.append(BuilderResult(None, "PooledBuilder: the build worker died (a crash in the compiler)"))
            else:
                results.append(BuilderResult(None, f"PooledBuilder: the build raised\n{done.value}"))
        return results

    def close(self) -> None:
        self.pool.shutdown()
