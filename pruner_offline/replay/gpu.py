"""GPU checks of a replayed program: TIR's verify_gpu_code under the record's hardware params,
and CUDA source generation (codegen needs no GPU)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import tvm
from tvm import s_tir, tirx

from ..tenset.records import HardwareParams


@dataclass(frozen=True)
class GpuCheck:
    ok: bool
    reason: str = ""
    source: str = ""


def _lower_for_verify(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    # the default pipeline's passes up to storage rewrite (what MetaSchedule's VerifyGPUCode
    # lowers through): blocks gone, buffers flattened, virtual threads injected, host and
    # device not yet split
    passes = [
        tirx.transform.BindTarget(target),
        s_tir.transform.CanonicalizeLoop(),
        s_tir.transform.LowerCrossThreadReduction(),
        s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.LiftThreadBinding(),
        s_tir.transform.CompactBufferAllocation(),
        s_tir.transform.UnifyThreadBinding(),
        s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.StmtSimplify(),
        s_tir.transform.LowerOpaqueBlock(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.NarrowDataType(32),
        s_tir.transform.LoopPartition(),
        tirx.transform.VectorizeLoop(True),
        s_tir.transform.InjectVirtualThread(),
        tirx.transform.StorageRewrite(),
    ]
    return tvm.ir.transform.Sequential(passes)(mod)


def gpu_constraints(hw: Optional[HardwareParams]) -> dict[str, int]:
    """verify_gpu_code's limits from Ansor's hardware params (as Ansor's GPU verifier sets them)."""
    if hw is None or not hw.max_threads_per_block:
        raise ValueError("a GPU check needs the record's hardware params")
    return {
        "max_shared_memory_per_block": hw.max_shared_memory_per_block or 0,
        "max_local_memory_per_block": hw.max_local_memory_per_block or 0,
        "max_threads_per_block": hw.max_threads_per_block,
        "max_vector_bytes": hw.vector_unit_bytes,
        "max_vthread": hw.max_vthread_extent or 1,
        "max_thread_x": hw.max_threads_per_block,
        "max_thread_y": hw.max_threads_per_block,
        "max_thread_z": hw.max_threads_per_block,
    }


OVER_LIMITS = "over the record's thread / shared-memory / vector-width limits"


def limit_violation(mod: tvm.IRModule, target: tvm.target.Target, hw: Optional[HardwareParams]) -> str:
    """"" when verify_gpu_code accepts ``mod`` under the record's limits, else why not. A program
    that passes once the per-block thread, shared-memory and vector-width limits are lifted
    fails with ``OVER_LIMITS``: TenSet's unmeasured programs are raw samples of Ansor's search,
    which checks them only by measuring."""
    lowered = _lower_for_verify(mod, target)
    constraints = gpu_constraints(hw)
    unlimited = dict(constraints, max_threads_per_block=1 << 30, max_thread_x=1 << 30,
                     max_shared_memory_per_block=1 << 40, max_vector_bytes=1 << 20)
    reason = ""
    for gv, func in lowered.functions.items():
        if not isinstance(func, tirx.PrimFunc) or s_tir.analysis.verify_gpu_code(func, constraints):
            continue
        over = s_tir.analysis.verify_gpu_code(func, unlimited)
        reason = OVER_LIMITS if over else f"verify_gpu_code rejects {gv.name_hint}"
    return reason


def check_gpu_program(mod: tvm.IRModule, target: tvm.target.Target, hw: Optional[HardwareParams]) -> GpuCheck:
    """``limit_violation``, then CUDA codegen."""
    try:
        reason = limit_violation(mod, target, hw)
        if reason:
            return GpuCheck(False, reason)
        lib = tvm.compile(mod, target=target)
        source = "".join(m.inspect_source() for m in lib.mod.imports if m.kind == "cuda")
    except Exception as exc:  # report, never raise: this runs over whole datasets
        return GpuCheck(False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}")
    return GpuCheck(True, "", source)
