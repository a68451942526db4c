"""Benchmark: how fast `collect` measures programs, against MetaSchedule's own tuning loop measuring
as many programs of the same tasks in the same process, and how noisy its labels are.

- Rate: `collect` (pruner_offline.collect) with --programs-per-task N on each workload, then
  MetaSchedule's `tune_tasks` with its LocalBuilder and LocalRunner, a random cost model (the same
  kind of programs: no model to train) and N trials per task; both with the same evaluator (number,
  repeat, min_repeat_ms, CPU cache flush) on the same machine. Printed: programs/s of each and the
  ratio (collect / MetaSchedule).
- Noise: --noise programs that collect measured are built and measured a second time; printed: the
  median and p90 over programs of |t2 - t1| / t1.
--rounds alternates the two loops that many times (load on a shared machine hits both).

    python bench/collect.py [--workloads matmul conv2d ...] [--programs 64] [--noise 200] [--rounds 1]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.runner import EvaluatorConfig

from pruner_offline.collect.run import collect
from pruner_offline.collect.settings import CollectSettings
from pruner_offline.collect.tasks import workload_tasks
from pruner_offline.measure.batch import MeasuredBatch
from pruner_offline.measure.measurers import run_measurers
from pruner_offline.measure.settings import MeasureSettings
from pruner_offline.targets import tuning_target
from pruner_offline.tenset.labels import FAILED_COST
from pruner_offline.tuning.context import make_context

WORKLOADS = ("matmul", "conv2d", "depthwise", "dense", "batch-matmul")


def metaschedule_rate(tasks, target, programs: int, measure: MeasureSettings, work: Path) -> tuple[int, float]:
    """Programs measured and seconds, by MetaSchedule's tuning loop with its own builder and runner."""
    contexts = [make_context(t.mod, target, num_threads=measure.build_workers, seed=k, task_name=t.name,
                             logger=logging.getLogger("bench.collect"))
                for k, t in enumerate(tasks)]
    evaluator = EvaluatorConfig(number=measure.number, repeat=measure.repeat, min_repeat_ms=measure.min_repeat_ms,
                                enable_cpu_cache_flush=measure.cpu_cache_flush)
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    database = ms.tune.tune_tasks(
        tasks=contexts, task_weights=[1.0] * len(contexts), work_dir=str(work), max_trials_global=programs * len(tasks),
        max_trials_per_task=programs, num_trials_per_iter=32,
        builder=ms.builder.LocalBuilder(max_workers=measure.build_workers, timeout_sec=measure.build_timeout_s),
        runner=ms.runner.LocalRunner(timeout_sec=measure.run_timeout_s, evaluator_config=evaluator),
        database=ms.database.JSONDatabase(work_dir=str(work)), cost_model=ms.cost_model.RandomModel(seed=0),
        task_scheduler="round-robin")
    return len(database.get_all_tuning_records()), time.perf_counter() - start


def collect_rate(tasks, programs: int, measure: MeasureSettings, out: Path) -> tuple[int, float]:
    settings = CollectSettings(programs_per_task=programs, batch_size=32, num_cores=measure.build_workers,
                               measure=measure)
    report = collect(tasks, out, settings)
    return report.measured, report.seconds


def remeasure(out: Path, target, measure: MeasureSettings, n: int) -> list[float]:
    """|t2 - t1| / t1 for the first n successful records of the collection in out."""
    records = [r for r in ms.database.JSONDatabase(work_dir=str(out)).get_all_tuning_records()
               if r.run_secs and 0 < float(r.run_secs[0]) < FAILED_COST][:n]
    mods = []
    for r in records:
        sch = s_tir.Schedule(r.workload.mod)
        r.trace.apply_to_schedule(sch, remove_postproc=False)
        mods.append(sch.mod)
    gaps = []
    with run_measurers(measure) as (builder, runner):
        for lo in range(0, len(records), 32):
            chunk = records[lo:lo + 32]
            batch = MeasuredBatch(mods[lo:lo + 32], [r.args_info for r in chunk], builder, runner, target)
            for r, (_, result) in zip(chunk, batch.results()):
                if result.error_msg is None:
                    first = statistics.fmean(float(t) for t in r.run_secs)
                    second = statistics.fmean(float(t) for t in result.run_secs)
                    gaps.append(abs(second - first) / first)
    return gaps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    p.add_argument("--programs", type=int, default=64, help="programs per task, each loop")
    p.add_argument("--noise", type=int, default=200, help="programs measured a second time")
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args()

    measure = MeasureSettings(cpu_cache_flush=True)
    tasks = workload_tasks(args.workloads)
    target = tuning_target("llvm", measure.build_workers)
    ours, theirs = [], []
    with tempfile.TemporaryDirectory(prefix="bench-collect-") as tmp:
        for k in range(args.rounds):
            n, s = collect_rate(tasks, args.programs, measure, Path(tmp) / f"collect{k}")
            ours.append(n / s)
            print(f"round {k}: collect               {n} programs in {s:.1f} s = {n / s:.2f} programs/s", flush=True)
            n, s = metaschedule_rate(tasks, target, args.programs, measure, Path(tmp) / f"ms{k}")
            theirs.append(n / s)
            print(f"round {k}: MetaSchedule tune loop {n} programs in {s:.1f} s = {n / s:.2f} programs/s", flush=True)
        gaps = sorted(remeasure(Path(tmp) / "collect0", target, measure, args.noise)) if args.noise else []
    print(f"\nworkloads {', '.join(args.workloads)}; {args.programs} programs each; "
          f"number {measure.number}, repeat {measure.repeat}, min_repeat_ms {measure.min_repeat_ms}, cache flush on; "
          f"TVM {tvm.__version__}")
    print(f"programs/s  collect {statistics.fmean(ours):.2f}  MetaSchedule {statistics.fmean(theirs):.2f}  "
          f"ratio {statistics.fmean(ours) / statistics.fmean(theirs):.2f}x (goal >= 1.5x)")
    if gaps:
        p90 = gaps[min(len(gaps) - 1, int(0.9 * len(gaps)))]
        print(f"label noise over {len(gaps)} programs measured twice: median |dt|/t {statistics.median(gaps):.3f}, "
              f"p90 {p90:.3f}")


if __name__ == "__main__":
    main()
