"""The TVM targets of this toolkit: a record's target, and the target a tuning run compiles for.

Today's TVM takes targets as dicts, not the CLI strings records hold.
"""

from __future__ import annotations

from typing import Optional

import tvm

from .tenset.records import HardwareParams

# record target options today's TVM still accepts, under the names it accepts them by
_OPTIONS = {
    "llvm": {"mtriple": "mtriple", "mcpu": "mcpu", "mattr": "mattr"},
    "cuda": {"arch": "arch", "max_num_threads": "max_num_threads", "thread_warp_size": "thread_warp_size"},
}


class TargetError(ValueError):
    pass


def parse_target_string(target: str) -> tuple[str, dict[str, str]]:
    """``"cuda -arch=sm_37 -max_num_threads=1024"`` -> ("cuda", {"arch": "sm_37", ...})."""
    kind, *parts = target.split()
    options = {}
    for part in parts:
        key, _, value = part.lstrip("-").partition("=")
        options[key] = value
    return kind, options


def _int_or_str(value: str) -> object:
    return int(value) if value.lstrip("-").isdigit() else value


def record_target(target: str, hw: Optional[HardwareParams]) -> tvm.target.Target:
    """The record's target, with its hardware params where the target has a field for them."""
    kind, options = parse_target_string(target)
    if kind not in _OPTIONS:
        raise TargetError(f"unsupported target kind {kind}")
    spec: dict[str, object] = {"kind": kind}
    if kind == "cuda":
        # Older records name no arch; TVM would then probe for nvcc and warn once per target built
        # (hundreds of times per featurize). sm_50 is the arch it falls back to: features ignore it.
        spec["arch"] = "sm_50"
    for key, name in _OPTIONS[kind].items():
        if key in options:
            value = options[key]
            spec[name] = value.split(",") if key == "mattr" else _int_or_str(value)
    if hw is not None:
        if kind == "llvm" and hw.num_cores > 0:
            spec["num-cores"] = hw.num_cores
        if kind == "cuda":
            for field in ("max_shared_memory_per_block", "max_threads_per_block"):
                value = getattr(hw, field)
                if value:
                    spec[field] = value
            if hw.warp_size:
                spec["thread_warp_size"] = hw.warp_size
    return tvm.target.Target(spec)


# The compute capability nvcc builds for, of the GPUs the draft score knows (devices.py)
CUDA_ARCH = {"k80": "sm_37", "t4": "sm_75", "titanv": "sm_70", "v100": "sm_70", "a100": "sm_80", "h100": "sm_90",
             "h200": "sm_90", "orin": "sm_87"}


def tuning_target(kind: str, num_cores: int, device: Optional[str] = None) -> tvm.target.Target:
    """The target a tuning run or a collection compiles for. ``device`` (cuda): the GPU to build
    for by name (CUDA_ARCH), which need not be here: the programs may be measured on a remote one."""
    if kind == "llvm":
        # TenSet's CPU target. The host's own mcpu would do on an AVX2 machine, but with AVX-512 or
        # VNNI MetaSchedule switches to schedule rules that need the tensor intrinsics (see measure/builder.py).
        return tvm.target.Target({"kind": "llvm", "num-cores": num_cores, "mcpu": "core-avx2"})
    if kind == "cuda":
        if device is None and tvm.cuda(0).exist:  # the GPU's own arch and limits
            return tvm.target.Target(tvm.target.Target.from_device(tvm.cuda(0)), host={"kind": "llvm"})
        if device is not None and device.lower() not in CUDA_ARCH:
            raise TargetError(f"unknown GPU {device!r} to build for; known: {', '.join(sorted(CUDA_ARCH))}")
        # No GPU here, or another one named: an H100/H200-class GPU's limits (every GPU of CUDA_ARCH
        # has 1024 threads and 48 KB of static shared memory a block), explicit so that Target does
        # not probe for them.
        return tvm.target.Target({"kind": "cuda", "arch": CUDA_ARCH[(device or "h200").lower()],
                                  "max_threads_per_block": 1024, "max_shared_memory_per_block": 49152,
                                  "thread_warp_size": 32}, host={"kind": "llvm"})
    raise ValueError(f"unsupported target kind {kind!r}: llvm or cuda")
