"""The analytic draft score: a throughput estimate (1/s, higher is faster) from PSA symbols and device
constants, with no learned weights.

GPU: Pruner's formula (docs/draft-score.md §1) per statement, t = max(t_comp, t_mem), score = 1 / Σ t, with FLOPs
and bytes in their units so t is in seconds.

CPU (our design; Pruner has none): the same roofline shape with the CPU's parallelism:
- core_eff = par / (ceil(par / cores) * cores), par = product of parallel extents (the last wave of
  parallel chunks leaves cores idle, as the GPU's wave penalty does for SMs);
- vec_eff = min(vector extent, SIMD lanes) / SIMD lanes (peak assumes full SIMD FMAs, a scalar
  innermost loop runs at 1/lanes of it);
- thread_pen = 1 + 1 / DataReusePenalty as on the GPU;
- t_comp = (F + guard work) * thread_pen * spill_pen / (peak * core_eff * vec_eff), the guard work being the
  comparisons and logical ops of if_then_else conditions (padding's bounds tests, inlined or in
  its own stage), each charged as one float op: with the padding inlined into a convolution the
  test runs once per multiply-add, and without the charge the draft rates such programs as if the
  padding were free; measured on XGB's tuning runs they ran 1.2-2.4x slower per unit of score
  than programs with a separate padding stage;
- spill_pen = 1 + SPILL_COST * (share of a reduction's register tile beyond the SIMD registers): the
  accumulators updated inside the innermost reduction loop (PsaSymbols.accumulators, in vector
  registers of `lanes` elements) stay in registers only while they fit; each one spilled costs a
  load and a store per multiply-add, and the loads and stores then bound the loop instead of the
  FMAs. Without it every sub-tiling of a parallel chunk's tile scores the same (the chunk's
  footprint decides MemWorkload), the draft-led search measured mostly programs tied at the top
  score, and among them a higher score meant a slower program (docs/draft-score.md);
- t_mem: copies move DRAM_workload elements; a compute statement whose per-chunk working set
  (MemWorkload elements) exceeds the per-core cache streams MemWorkload * par elements from DRAM;
- t = max(t_comp, t_mem) + parallel_launch_s when the statement runs under a parallel loop: waking
  TVM's thread pool costs microseconds, which decides the ranking of small kernels (on tenset-mini
  it lifts the mean per-task Spearman with measured cost from -0.10 to -0.37).
"""

from __future__ import annotations

import numpy as np

from ..devices import DeviceConstants
from .symbols import PsaSymbols

_MIN_TIME_S = 1e-12  # keeps the score finite for programs with no modelled work
# extra cost of a multiply-add whose accumulator lives in memory: its load and store, issued at about
# half the FMAs' rate; the ranking it gives barely moves between 1 and 8 (docs/draft-score.md)
SPILL_COST = 2.0


def _gpu_times(sym: PsaSymbols, dev: DeviceConstants) -> np.ndarray:
    grid = np.maximum(sym.column("grid"), 1.0)
    block = np.maximum(sym.column("block"), 1.0)
    warps_exact = block / dev.warp_size
    warps = np.ceil(warps_exact)
    warp_pen = warps_exact / warps
    thread_pen = 1.0 + 1.0 / sym.column("DataReusePenalty")
    few_blocks = grid < dev.num_units
    active = np.minimum(warps, dev.warp_schedulers)
    units = np.where(few_blocks, grid * active, grid)
    slots = np.where(few_blocks, dev.warp_schedulers * dev.num_units, dev.num_units)
    wave_pen = units / (np.ceil(units / slots) * slots)
    reg = sym.column("RegUsage")
    reg_pen = np.where(reg >= 128, reg / 128.0, 1.0)
    t_comp = sym.column("F") * thread_pen / (dev.peak_gflops * 1e9 * wave_pen * warp_pen / reg_pen)
    t_mem = sym.column("DRAM_workload") * sym.elem_bytes / (dev.bandwidth_gbs * 1e9)
    return np.maximum(t_comp, t_mem)


def _spill_penalty(sym: PsaSymbols, lanes: np.ndarray, dev: DeviceConstants) -> np.ndarray:
    """1 + SPILL_COST * the share of each statement's register tile that does not fit the SIMD
    registers; 1 everywhere for constants that name no register count."""
    if not dev.vector_registers:
        return np.ones(len(lanes))
    vector = np.maximum(sym.accumulator_vector, 1.0)
    registers = sym.accumulators / vector * np.ceil(vector / lanes)
    spilled = np.where(registers > dev.vector_registers, 1.0 - dev.vector_registers / np.maximum(registers, 1.0), 0.0)
    return 1.0 + SPILL_COST * spilled


def _cpu_times(sym: PsaSymbols, dev: DeviceConstants) -> np.ndarray:
    par = np.maximum(sym.column("grid"), 1.0)
    core_eff = par / (np.ceil(par / dev.num_units) * dev.num_units)
    lanes = np.maximum(dev.vector_bytes / sym.elem_bytes, 1.0)
    vec_eff = np.minimum(sym.vector_extent, lanes) / lanes
    thread_pen = 1.0 + 1.0 / sym.column("DataReusePenalty")
    work = sym.column("F") + sym.guard_work * par
    t_comp = work * thread_pen * _spill_penalty(sym, lanes, dev) / (dev.peak_gflops * 1e9 * core_eff * vec_eff)
    mem = sym.column("MemWorkload")
    spills = mem * sym.elem_bytes > dev.cache_bytes
    elements = sym.column("DRAM_workload") + np.where(spills, mem * par, 0.0)
    t_mem = elements * sym.elem_bytes / (dev.bandwidth_gbs * 1e9)
    return np.maximum(t_comp, t_mem) + np.where(par > 1, dev.parallel_launch_s, 0.0)


def statement_times(sym: PsaSymbols, dev: DeviceConstants) -> np.ndarray:
    """[n] modelled seconds per statement."""
    return _gpu_times(sym, dev) if dev.is_gpu else _cpu_times(sym, dev)


def analytic_score(sym: PsaSymbols, dev: DeviceConstants) -> float:
    return float(1.0 / max(float(statement_times(sym, dev).sum()), _MIN_TIME_S))


def row_scores(rows: PsaSymbols, program: np.ndarray, n: int, dev: DeviceConstants) -> np.ndarray:
    """analytic_score of n programs whose statements are the rows, row i belonging to program[i]."""
    return 1.0 / np.maximum(np.bincount(program, weights=statement_times(rows, dev), minlength=n), _MIN_TIME_S)
