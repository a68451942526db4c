"""Device constants for the analytic draft score, by name or given explicitly.

GPU figures are fp32 peak GFLOP/s, DRAM bandwidth GB/s and SM count. K80, T4, TITAN V and A100 are the
values the Pruner paper uses; V100 (SXM2), H100 (SXM5) and H200 are NVIDIA's datasheet figures
(H100 SXM and H200 share the GH100 die: 132 SMs x 128 FP32 lanes x 2 x ~1.98 GHz ~ 66.9 TFLOP/s; they
differ in memory: 3.35 TB/s HBM3 vs 4.8 TB/s HBM3e).

CPU figures (cores, SIMD width, last-level cache, peak, bandwidth) are approximate datasheet values for
the CPUs TenSet measured on; peak = cores x GHz x FMA units x 2 x fp32 lanes.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, fields

from .errors import BadInput


@dataclass(frozen=True)
class DeviceConstants:
    name: str
    is_gpu: bool
    peak_gflops: float
    bandwidth_gbs: float
    num_units: int  # SMs on a GPU, cores on a CPU
    vector_bytes: int = 0  # CPU SIMD register width
    cache_bytes: int = 0  # CPU last-level cache per core
    warp_size: int = 32
    warp_schedulers: int = 4  # per SM
    parallel_launch_s: float = 5e-6  # CPU: waking the thread pool for one parallel loop
    # CPU SIMD registers (16 with AVX2, 32 with AVX-512 or NEON), for the register-spill term of the
    # draft score; 0 leaves the term out, as constants recorded before it existed do
    vector_registers: int = 0


DEVICES: dict[str, DeviceConstants] = {
    d.name: d
    for d in (
        DeviceConstants("k80", True, 8226, 480, 26),
        DeviceConstants("t4", True, 8141, 320, 40),
        DeviceConstants("titanv", True, 14900, 651, 80),
        DeviceConstants("v100", True, 15700, 900, 80),
        DeviceConstants("a100", True, 19490, 1935, 108),
        DeviceConstants("h100", True, 66900, 3350, 132),
        DeviceConstants("h200", True, 66900, 4800, 132),
        DeviceConstants("orin", True, 2660, 204, 16),
        # TenSet CPUs. 8272CL: 2 AVX-512 FMA units at ~2.6 GHz; 7452: AVX2, 2 FMA, ~2.35 GHz;
        # graviton2: 2x128-bit NEON FMA, 2.5 GHz; i7 (8th gen desktop): AVX2, 6 cores, 3.7 GHz.
        DeviceConstants("platinum-8272", False, 16 * 2.6 * 2 * 2 * 16, 140, 16, 64, 1_375_000, vector_registers=32),
        DeviceConstants("epyc-7452", False, 32 * 2.35 * 2 * 2 * 8, 190, 32, 32, 4_000_000, vector_registers=16),
        DeviceConstants("graviton2", False, 64 * 2.5 * 2 * 2 * 4, 200, 64, 16, 1_000_000, vector_registers=32),
        DeviceConstants("i7", False, 6 * 3.7 * 2 * 2 * 8, 40, 6, 32, 2_000_000, vector_registers=16),
        # A 2-vCPU cloud slice of an EPYC (the machine this toolkit's CPU benchmarks run on): two
        # cores' share of the 7452's peak and of its memory bandwidth.
        DeviceConstants("epyc-2vcpu", False, 2 * 2.35 * 2 * 2 * 8, 20, 2, 32, 4_000_000, vector_registers=16),
    )
}
# The one home of the defaults: the GPU of the bundled H200 data, the CPU the bundled llvm checkpoints
# were featurized with (tenset-mini was measured on an EPYC Zen 3; Zen 2's 7452 is the nearest here).
DEFAULT_DEVICE = {"cuda": "h200", "llvm": "epyc-7452"}
GPU_KINDS = frozenset({"cuda", "rocm", "vulkan", "metal", "opencl"})


class UnknownDevice(BadInput, KeyError):
    """A KeyError too: callers looked names up in a dict before this had its own type."""


def get_device(device: str | DeviceConstants) -> DeviceConstants:
    if isinstance(device, DeviceConstants):
        return device
    try:
        return DEVICES[device.lower()]
    except KeyError:
        raise UnknownDevice(f"unknown device {device!r}; known: {', '.join(sorted(DEVICES))} "
                            "(or pass a DeviceConstants)") from None


def default_device(target_kind: str) -> DeviceConstants:
    return DEVICES[DEFAULT_DEVICE["cuda" if target_kind in GPU_KINDS else "llvm"]]


def device_for(target_kind: str, device: str | DeviceConstants | None = None) -> DeviceConstants:
    """The constants to use for programs of ``target_kind``; refuses a CPU for GPU programs and back."""
    dev = default_device(target_kind) if device is None else get_device(device)
    if dev.is_gpu != (target_kind in GPU_KINDS):
        raise BadInput(f"device {dev.name} is a {'GPU' if dev.is_gpu else 'CPU'}, but the programs are "
                         f"{target_kind} programs")
    return dev


def device_to_json(dev: DeviceConstants) -> dict:
    """How stores and model files record the constants their features were made with."""
    return asdict(dev)


_JSON_TYPES = {"str": (str,), "bool": (bool,), "int": (int,), "float": (int, float)}
_POSITIVE = ("peak_gflops", "bandwidth_gbs", "num_units", "warp_size", "warp_schedulers")


def device_from_json(d: object) -> DeviceConstants:
    """The constants a store or model file recorded (device_to_json's form); ValueError saying
    what is wrong with them."""
    if not isinstance(d, dict):
        raise ValueError(f"{str(d)[:80]!r} is not a map of device constants")
    known = {f.name: f for f in fields(DeviceConstants)}
    missing = [k for k, f in known.items() if f.default is MISSING and k not in d]
    unknown = sorted(str(k) for k in d if k not in known)
    if missing or unknown:
        parts = ([f"lack {', '.join(missing)}"] if missing else []) + ([f"hold unknown {', '.join(unknown)}"]
                                                                        if unknown else [])
        raise ValueError("device constants " + "; ".join(parts))
    for k, v in d.items():
        want = _JSON_TYPES[known[k].type]
        if not isinstance(v, want) or (bool not in want and isinstance(v, bool)) or (
                isinstance(v, float) and not math.isfinite(v)):
            raise ValueError(f"device constants: {k} is {v!r}, expected {known[k].type}")
        # the draft score divides by these (a model file with num_units 0 tuned on divide-by-zero warnings)
        if k in _POSITIVE and v <= 0 or known[k].type in ("int", "float") and v < 0:
            sign = "positive" if k in _POSITIVE else "non-negative"
            raise ValueError(f"device constants: {k} is {v!r}, expected a {sign} number")
    return DeviceConstants(**d)


def differences(a: DeviceConstants, b: DeviceConstants, here: str, there: str) -> str:
    """Where two sets of constants of one name differ, for messages ("" when the names differ:
    the names say it)."""
    if a.name != b.name:
        return ""
    return " (" + ", ".join(f"{k} {v} {here}, {getattr(b, k)} {there}" for k, v in asdict(a).items()
                            if v != getattr(b, k)) + ")"


def describe_devices(devices: dict[str, dict]) -> str:
    """``{"llvm": {...}}`` -> ``"llvm: epyc-7452"`` for messages."""
    return ", ".join(f"{kind}: {d.get('name', '?')}" for kind, d in sorted(devices.items())) or "none recorded"
