"""The draft score's constants of the CPU this process runs on, read from the OS.

The named CPUs of devices.py are those TenSet measured on; a run tuned on another machine ranks its
search best with that machine's own figures (a 2-core slice waits on programs that fill 32 cores).
Cores are the run's; SIMD width and registers are what the tuning target compiles for (core-avx2:
32 bytes, 16 registers) where the CPU has them; clock and last-level cache come from
/proc/cpuinfo and sysfs; memory bandwidth is measured, as no OS file states it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .devices import DeviceConstants

HOST = "host"
# the tuning target's ISA (targets.tuning_target: mcpu core-avx2) bounds what the programs use
TARGET_VECTOR_BYTES = 32
TARGET_VECTOR_REGISTERS = 16
FMA_UNITS = 2  # per core, on every x86 server core since Haswell and on Neoverse cores
_FALLBACK_GHZ = 2.5
_FALLBACK_CACHE = 1 << 20


@dataclass(frozen=True)
class CpuInfo:
    ghz: float
    vector_bytes: int  # the widest SIMD the CPU has
    cache_bytes: int  # last-level cache per core


def vector_bytes_of(flags: set[str]) -> int:
    if "avx512f" in flags:
        return 64
    if "avx2" in flags or "avx" in flags:
        return 32
    return 16  # SSE2 (every x86-64) or NEON/ASIMD


def parse_cpuinfo(text: str) -> tuple[float, set[str]]:
    """/proc/cpuinfo -> (GHz of its first processor, 0 where unstated; its feature flags)."""
    ghz, flags = 0.0, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "cpu mhz" and not ghz:
            try:
                ghz = float(value) / 1000
            except ValueError:
                pass
        elif key in ("flags", "features") and not flags:  # x86, arm64
            flags = set(value.split())
    return ghz, flags


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG") or 0) * scale


def _cpu_count(cpu_list: str) -> int:
    """sysfs's "0-3,8" -> 5."""
    count = 0
    for part in cpu_list.strip().split(","):
        lo, _, hi = part.partition("-")
        if lo:
            count += int(hi or lo) - int(lo) + 1
    return count


def cache_per_core(cache_dir: Path) -> int:
    """The last level of sysfs's cpuN/cache/index*: its size over the CPUs that share it; 0 if unreadable."""
    best = (0, 0)
    for index in sorted(cache_dir.glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            share = _cpu_count((index / "shared_cpu_list").read_text()) or 1
            best = max(best, (level, _size((index / "size").read_text()) // share))
        except (OSError, ValueError):
            continue
    return best[1]


def read_cpu(proc: Path = Path("/proc/cpuinfo"),
             cache_dir: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> CpuInfo:
    try:
        ghz, flags = parse_cpuinfo(proc.read_text())
    except OSError:
        ghz, flags = 0.0, set()
    return CpuInfo(ghz or _FALLBACK_GHZ, vector_bytes_of(flags), cache_per_core(cache_dir) or _FALLBACK_CACHE)


def copy_bandwidth_gbs(mib: int = 64, tries: int = 3) -> float:
    """GB/s of the best of ``tries`` copies of ``mib`` MiB (read + write), past any cache; two
    significant digits, so that runs on one machine rank with one figure."""
    a = np.ones(mib << 18, dtype=np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - start)
    gbs = 2 * a.nbytes / best / 1e9
    return float(f"{gbs:.2g}")


def host_cpu(num_cores: int, cpu: CpuInfo | None = None, bandwidth_gbs: float | None = None) -> DeviceConstants:
    """Constants of this machine for a run on ``num_cores`` of its cores."""
    cpu = read_cpu() if cpu is None else cpu
    vector = min(cpu.vector_bytes, TARGET_VECTOR_BYTES)
    peak = num_cores * cpu.ghz * FMA_UNITS * 2 * vector / 4
    return DeviceConstants(HOST, False, round(peak, 1), copy_bandwidth_gbs() if bandwidth_gbs is None else bandwidth_gbs,
                           num_cores, vector, cpu.cache_bytes, vector_registers=TARGET_VECTOR_REGISTERS)
