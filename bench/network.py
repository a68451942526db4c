"""Benchmark: a whole network (the built-in ResNet-18, 1x3x64x64) tuned end to end within one trial
budget, our cost model vs MetaSchedule's XGB, side by side: the compiled network's end-to-end
latency, search seconds and seconds inside the cost model; torch's own latency (eager, same thread
count) as a reference. One run each, ours first; on a shared machine, read the ratios with the load
in mind.

    python bench/network.py --checkpoint checkpoints/pacm.pt --trials 200
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from pruner_offline.errors import dumps
from pruner_offline.tuning.network_run import NetworkReport, example_inputs, import_program, tune_network
from pruner_offline.tuning.networks import NETWORKS, named_network
from pruner_offline.tuning.settings import MeasureSettings, TuneSettings


def torch_latency_s(program: torch.export.ExportedProgram, inputs: list[torch.Tensor], threads: int,
                    runs: int = 20) -> float:
    module = program.module()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)  # as many as the compiled network uses
    with torch.no_grad():
        module(*inputs)
        start = time.perf_counter()
        for _ in range(runs):
            module(*inputs)
    elapsed = time.perf_counter() - start
    torch.set_num_threads(before)
    return elapsed / runs


def table(reports: list[NetworkReport], torch_s: float) -> str:
    lines = [f"{'cost model':<12}{'e2e ms':>9}{'vs torch':>10}{'search s':>10}{'model s':>9}{'compile s':>11}"
             f"{'trials':>8}{'tasks tuned':>13}"]
    for r in reports:
        tuned = sum(t.trials > 0 for t in r.tasks)
        lines.append(f"{r.cost_model:<12}{1e3 * r.end_to_end_latency_s:>9.3f}{torch_s / r.end_to_end_latency_s:>9.2f}x"
                     f"{r.search_seconds:>10.1f}{r.cost_model_seconds:>9.2f}{r.compile_seconds:>11.1f}{r.trials:>8}"
                     f"{tuned:>8}/{len(r.tasks)}")
    lines.append(f"{'torch eager':<12}{1e3 * torch_s:>9.3f}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--network", default="resnet18", choices=tuple(NETWORKS))
    p.add_argument("--checkpoint", help="ours: PaCM model file (default: the analytic draft score alone)")
    p.add_argument("--draft", help="ours: learned draft model file")
    p.add_argument("--trials", type=int, default=200, help="all tasks together (ResNet-18 has 19)")
    p.add_argument("--trials-per-batch", type=int, default=8)
    p.add_argument("--population", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--work-dir", type=Path, help="default: a temporary directory")
    args = p.parse_args()
    torch.set_num_threads(1)  # the cost model's torch work stays off the cores the measurements use

    program = named_network(args.network)
    base = TuneSettings(trials=args.trials, trials_per_batch=args.trials_per_batch, population_size=args.population,
                        seed=args.seed, num_cores=args.cores, checkpoint=args.checkpoint, draft=args.draft,
                        measure=MeasureSettings(build_workers=args.cores))
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.work_dir or Path(tmp)
        for cost_model in ("pruner", "xgb"):
            s = base if cost_model == "pruner" else replace(base, cost_model="xgb", checkpoint=None, draft=None)
            report, _ = tune_network(program, args.network, root / cost_model, s)
            reports.append(report)
            print(f"{cost_model}: {report.to_json()}", flush=True)
    torch_s = torch_latency_s(program, example_inputs(program, import_program(program, args.network), args.seed),
                              args.cores)
    print(table(reports, torch_s))
    ours, xgb = reports
    print(f"end-to-end latency xgb/ours: {xgb.end_to_end_latency_s / ours.end_to_end_latency_s:.2f}x  "
          f"search seconds xgb/ours: {xgb.search_seconds / ours.search_seconds:.2f}x  "
          f"cost-model seconds ours/xgb: {ours.cost_model_seconds / max(xgb.cost_model_seconds, 1e-9):.2f}")
    print(dumps({"network": args.network, "trials": args.trials, "torch_eager_s": torch_s,
                      "runs": [asdict(r) for r in reports]}))


if __name__ == "__main__":
    main()
