"""Wall seconds to build batches of real candidates: MetaSchedule's LocalBuilder (with our build
function, as the toolkit used it before 2026-12-03) against PooledBuilder, in one
process, alternating batch by batch.

LocalBuilder starts new worker processes for every batch (and a pool for its start-up check), each
importing TVM before it builds; PooledBuilder keeps its workers for the run. Each arm builds the
same --batches batches of --batch candidates sampled from the workload's design space (llvm), as
a tuning run of batches x batch trials would. Printed: seconds per batch of each arm (start-up
included in the first), the ratio of their totals, and the same without the first batch.

    python bench/build.py [--workloads matmul conv2d dense] [--batches 4] [--batch 16]
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", nargs="+", default=["matmul", "conv2d", "dense"])
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    from tvm.s_tir.meta_schedule.builder import BuilderInput, LocalBuilder

    from pruner_offline.targets import tuning_target
    from pruner_offline.measure.builder import PooledBuilder, build_module
    from pruner_offline.tuning.search.sampling import sample_candidates
    from pruner_offline.tuning.frontends.workloads import named_workload

    target = tuning_target("llvm", args.workers)
    totals = {"local": [], "pooled": []}
    for wl in args.workloads:
        _, cands = sample_candidates(named_workload(wl), args.batches * args.batch)
        batches = [[BuilderInput(c.sch.mod, target) for c in cands[i * args.batch:(i + 1) * args.batch]]
                   for i in range(args.batches)]
        # each arm is made just before its first batch, so that the pooled workers' start does
        # not run beside the other arm's build
        make = {"local": lambda: LocalBuilder(max_workers=args.workers, f_build=build_module),
                "pooled": lambda: PooledBuilder(max_workers=args.workers, timeout_sec=30.0)}
        arms, seconds = {}, {arm: [] for arm in make}
        for i, batch in enumerate(batches):
            for arm in make:
                start = time.perf_counter()
                if i == 0:
                    arms[arm] = make[arm]()
                failed = sum(r.error_msg is not None for r in arms[arm].build(batch))
                seconds[arm].append(time.perf_counter() - start)
                if failed:
                    print(f"{wl} {arm} batch {i}: {failed} builds failed")
        arms["pooled"].close()
        for arm in arms:
            totals[arm].append(seconds[arm])
        print(json.dumps({"workload": wl, **{f"{arm}_s": [round(s, 2) for s in v] for arm, v in seconds.items()}}))
    local, pooled = (sum(sum(v) for v in totals[a]) for a in ("local", "pooled"))
    local_later, pooled_later = (sum(sum(v[1:]) for v in totals[a]) for a in ("local", "pooled"))
    print(f"{len(args.workloads)} workloads x {args.batches} batches of {args.batch}: LocalBuilder {local:.1f} s, "
          f"PooledBuilder {pooled:.1f} s, ratio {local / pooled:.2f}x; after the first batch "
          f"{local_later:.1f} s vs {pooled_later:.1f} s, {local_later / pooled_later:.2f}x")


if __name__ == "__main__":
    main()
