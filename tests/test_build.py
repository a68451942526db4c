"""The tuning runs' builder: workers kept between batches, a failing build reported alone."""

import os
from pathlib import Path

import numpy as np
import tvm
from tvm import s_tir, te
from tvm.s_tir.meta_schedule.builder import BuilderInput

from pruner_offline.targets import tuning_target
from pruner_offline.measure.builder import PooledBuilder
from pruner_offline.tuning.frontends.workloads import named_workload


def _thread_bound() -> tvm.IRModule:
    """A kernel with a threadIdx loop, which the llvm target cannot build."""
    a = te.placeholder((4,), name="a")
    b = te.compute((4,), lambda i: a[i] * 2, name="b")
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b]).with_attr("global_symbol", "main")}))
    (i,) = sch.get_loops(sch.get_sblock("b"))
    sch.bind(i, "threadIdx.x")
    return sch.mod


def _worker_pids(builder: PooledBuilder, n: int) -> set[int]:
    return {r.value for r in builder.pool.map_with_error_catching(lambda _: os.getpid(), range(n))}


def test_the_builder_keeps_its_workers_and_reports_a_failing_build_alone():
    target = tuning_target("llvm", 2)
    good = named_workload("matmul-small")
    builder = PooledBuilder(max_workers=2, timeout_sec=120)
    try:
        pids = set()
        for _ in range(3):
            results = builder.build([BuilderInput(good, target), BuilderInput(_thread_bound(), target),
                                     BuilderInput(good, target)])
            assert [r.error_msg is None for r in results] == [True, False, True]
            assert "the build raised" in results[1].error_msg
            pids |= _worker_pids(builder, 4)
        # MetaSchedule's LocalBuilder starts new processes for every batch: 6 here at least
        assert 1 <= len(pids) <= 2, pids
        path = Path(results[0].artifact_path)
        assert path.is_file()
        kernel = tvm.runtime.load_module(str(path))
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((64, 64), dtype=np.float32), rng.standard_normal((64, 64), dtype=np.float32)
        c = tvm.runtime.tensor(np.zeros((64, 64), np.float32))
        kernel["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
        np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    finally:
        builder.close()
