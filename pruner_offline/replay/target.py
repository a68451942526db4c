"""TVM targets for records: today's TVM takes targets as dicts, not the CLI strings records hold."""

from __future__ import annotations

from typing import Optional

import tvm

from ..tenset.records import HardwareParams

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


def make_target(target: str, hw: Optional[HardwareParams]) -> tvm.target.Target:
    """The record's target, with its hardware params where the target has a field for them."""
    kind, options = parse_target_string(target)
    if kind not in _OPTIONS:
        raise TargetError(f"unsupported target kind {kind}")
    spec: dict[str, object] = {"kind": kind}
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
