"""Builder and runner for tuning runs on this machine.

MetaSchedule's default build function imports `tvm.s_tir.tensor_intrin` (~25 s of TVMScript parsing)
in every worker, and LocalBuilder starts fresh workers for every batch: on a 2-core machine that is
most of a tuning run. The intrinsics only matter to candidates that tensorize, and those can only
come from schedule rules that need the intrinsics registered in the tuning process, which this
toolkit never imports, so the build below skips the import. Workers unpickle `build_module` by
reference, which imports only this module (TVM, no torch).
"""

from __future__ import annotations

import tvm
from tvm.s_tir.meta_schedule.builder import LocalBuilder
from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, LocalRunner
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

from .settings import MeasureSettings


def build_module(mod: tvm.IRModule, target: tvm.target.Target, _params) -> tvm.runtime.Module:
    # The layout-rewrite blocks only describe a weight transform done ahead of time; the measured
    # kernel must not contain them (MetaSchedule's own build does the same).
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm.driver.build(mod, target=target)


def make_builder(s: MeasureSettings) -> LocalBuilder:
    return LocalBuilder(max_workers=s.build_workers, timeout_sec=s.build_timeout_s, f_build=build_module)


def make_runner(s: MeasureSettings) -> LocalRunner:
    return LocalRunner(timeout_sec=s.run_timeout_s, evaluator_config=EvaluatorConfig(
        number=s.number, repeat=s.repeat, min_repeat_ms=s.min_repeat_ms, enable_cpu_cache_flush=False))
