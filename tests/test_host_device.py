"""The draft score's constants of this machine, read from /proc/cpuinfo and sysfs (tune's default
--search-device for a CPU run measured here)."""

from pathlib import Path

import pytest

from pruner_offline.host_device import (CpuInfo, cache_per_core, copy_bandwidth_gbs, host_cpu, parse_cpuinfo,
                                        read_cpu, vector_bytes_of)

X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14
cpu MHz\t\t: 2596.122
flags\t\t: fpu sse2 avx fma avx2 avx512f
processor\t: 1
cpu MHz\t\t: 1800.000
flags\t\t: fpu
"""
ARM = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes crc32
"""


def _cache(root: Path, index: int, level: int, kind: str, size: str, shared: str) -> None:
    d = root / f"index{index}"
    d.mkdir(parents=True)
    for name, text in (("level", f"{level}\n"), ("type", f"{kind}\n"), ("size", f"{size}\n"),
                       ("shared_cpu_list", f"{shared}\n")):
        (d / name).write_text(text)


def test_cpuinfo_is_read_from_its_first_processor():
    ghz, flags = parse_cpuinfo(X86)
    assert ghz == pytest.approx(2.596122) and vector_bytes_of(flags) == 64
    ghz, flags = parse_cpuinfo(ARM)
    assert ghz == 0 and vector_bytes_of(flags) == 16
    assert vector_bytes_of({"avx2"}) == 32 and vector_bytes_of(set()) == 16


def test_the_last_level_cache_is_shared_out_over_the_cpus_that_share_it(tmp_path):
    _cache(tmp_path, 0, 1, "Data", "48K", "0")
    _cache(tmp_path, 1, 1, "Instruction", "32K", "0")
    _cache(tmp_path, 2, 2, "Unified", "1024K", "0")
    _cache(tmp_path, 3, 3, "Unified", "32768K", "0-3,8-11")
    assert cache_per_core(tmp_path) == (32 << 20) // 8
    assert cache_per_core(tmp_path / "absent") == 0


def test_unreadable_files_give_stated_fallbacks_not_an_error(tmp_path):
    cpu = read_cpu(tmp_path / "no-cpuinfo", tmp_path / "no-cache")
    assert cpu.ghz > 0 and cpu.vector_bytes == 16 and cpu.cache_bytes > 0


def test_the_constants_count_the_runs_cores_and_the_targets_simd_width():
    dev = host_cpu(2, CpuInfo(ghz=2.5, vector_bytes=64, cache_bytes=4 << 20), bandwidth_gbs=20.0)
    # core-avx2 programs use 32-byte vectors of 8 fp32 lanes, 2 FMA units, 2 flops an FMA
    assert (dev.num_units, dev.vector_bytes, dev.vector_registers) == (2, 32, 16)
    assert dev.peak_gflops == pytest.approx(2 * 2.5 * 2 * 2 * 8)
    assert dev.cache_bytes == 4 << 20 and dev.bandwidth_gbs == 20.0 and not dev.is_gpu


def test_this_machines_constants_are_plausible():
    dev = host_cpu(1)
    assert 1 < dev.peak_gflops < 10_000 and 0.1 < dev.bandwidth_gbs < 2_000
    assert copy_bandwidth_gbs(mib=8, tries=1) > 0
