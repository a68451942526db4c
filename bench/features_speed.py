"""Featurization speed per core, and where the time goes.

Programs: small hand-scheduled TE computes (dense/conv2d, CPU and GPU) and, when ../shared/h200-ms is
present, a sample of real MetaSchedule CUDA programs. The reference measured in the same run is
MetaSchedule's PerStoreFeature alone (the C++ extractor, fed a ready Schedule); the breakdown says
what the rest of featurize_prim_func adds on top of it.

    python bench/features_speed.py [--h200 60]
"""

from __future__ import annotations

import argparse
import json
import time

from tvm import s_tir, te, topi


def _timed(fn, items, repeat: int = 3) -> float:
    """Best-of-repeat seconds per item."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, (time.perf_counter() - start) / len(items))
    return best


def small_programs() -> list[tuple[str, object]]:
    out = []
    for n in (64, 128, 256):
        x = te.placeholder((n, n), name="x")
        w = te.placeholder((n, n), name="w")
        dense = topi.nn.dense(x, w)
        for kind in ("llvm", "cuda"):
            sch = s_tir.Schedule(te.create_prim_func([x, w, dense]))
            blk = sch.get_sblock(dense.op.name)
            i, j, _ = sch.get_loops(blk)
            if kind == "cuda":
                sch.bind(i, "blockIdx.x")
                j0, j1 = sch.split(j, [None, 32])
                sch.bind(j1, "threadIdx.x")
                sch.reverse_compute_at(sch.cache_write(blk, 0, "local"), j1)
            else:
                sch.parallel(i)
                sch.vectorize(sch.split(j, [None, 16])[1])
            out.append((kind, sch.mod["main"]))
    data = te.placeholder((1, 32, 28, 28), name="data")
    weight = te.placeholder((32, 32, 3, 3), name="weight")
    conv = topi.nn.conv2d_nchw(data, weight, 1, 1, 1)
    out.append(("llvm", te.create_prim_func([data, weight, conv])))
    return out


def measure(programs: list[tuple[str, object]]) -> dict:
    from pruner_offline.features.extract import featurize_prim_func
    from pruner_offline.features.per_store import per_store_features
    from pruner_offline.features.tir_walk import walk

    schedules = [(kind, s_tir.Schedule(func)) for kind, func in programs]
    for kind, func in programs:
        featurize_prim_func(func, kind)  # warms the per-target extractors
    total = _timed(lambda p: featurize_prim_func(p[1], p[0]), programs)
    from_schedule = _timed(lambda p: featurize_prim_func(p[1], p[0]), schedules)
    extractor = _timed(lambda p: per_store_features(p[1], p[0]), schedules)
    build_schedule = _timed(lambda p: s_tir.Schedule(p[1]), programs)
    tir_walk = _timed(lambda p: walk(p[1]), programs)
    return {
        "programs": len(programs),
        "programs_per_second": round(1 / total, 1),
        "programs_per_second_from_schedule": round(1 / from_schedule, 1),
        "ms_per_program": {
            "total": round(total * 1e3, 2),
            "per_store_extractor_cpp": round(extractor * 1e3, 2),
            "schedule_construction": round(build_schedule * 1e3, 2),
            "tir_walk": round(tir_walk * 1e3, 2),
            "symbols_dataflow_score_rest": round((total - extractor - build_schedule - tir_walk) * 1e3, 2),
        },
        "ratio_total_to_extractor": round(total / extractor, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--h200", type=int, default=60, help="h200-ms programs to time (0: none)")
    args = parser.parse_args()
    report = {"small": measure(small_programs())}
    from draft_score_h200 import DEFAULT_ROOT, load_h200_programs

    if args.h200 and (DEFAULT_ROOT / "database_tuning_record.json").is_file():
        lines = list(range(0, 1821, max(1, 1821 // args.h200)))
        programs = [("cuda", p.func) for p in load_h200_programs(DEFAULT_ROOT, lines)]
        report["h200_ms"] = measure(programs)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
