"""Benchmark: a whole network (the built-in ResNet-18, 1x3x64x64) tuned end to end within one trial
budget, our cost model vs MetaSchedule's XGB, side by side: the compiled network's end-to-end
latency, search seconds and seconds inside the cost model. References in the same run: the network
compiled untuned (TVM's default schedules) and torch eager (the faster of 1 and --cores threads: on
a loaded machine OpenMP's spinning threads can make 2 threads 10x slower than 1).

One tuning run each, ours first. Latencies on a shared machine drift with its load, so after both
runs every compiled network is re-timed in alternation (3 rounds, median): compare those.

    python bench/network.py --checkpoint checkpoints/pacm.pt --trials 200
    python bench/network.py --checkpoint checkpoints/pacm.pt --network bert-layer --trials-per-task 64
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
from tvm.s_tir.meta_schedule.database import MemoryDatabase
from tvm.s_tir.meta_schedule.relax_integration import compile_relax

from pruner_offline.errors import dumps
from pruner_offline.targets import tuning_target
from pruner_offline.tuning.frontends.network import inference_module, network_kernels
from pruner_offline.tuning.run.network import CompiledNetwork, network_inputs, tune_network
from pruner_offline.tuning.frontends.torch_export import NETWORKS, named_network, torch_network
from pruner_offline.measure.settings import MeasureSettings
from pruner_offline.tuning.settings import PrunerSettings, TuneSettings


def torch_latency_s(program: torch.export.ExportedProgram, inputs: list[torch.Tensor], threads: int,
                    runs: int = 10) -> float:
    module = program.module()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    with torch.no_grad():
        module(*inputs)
        start = time.perf_counter()
        for _ in range(runs):
            module(*inputs)
    elapsed = time.perf_counter() - start
    torch.set_num_threads(before)
    return elapsed / runs


def retimed_s(networks: dict[str, CompiledNetwork], inputs: list[torch.Tensor], rounds: int = 3) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in networks}
    for _ in range(rounds):
        for name, network in networks.items():
            times[name].append(network.latency_s(inputs))
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--network", default="resnet18", choices=tuple(NETWORKS))
    p.add_argument("--checkpoint", help="ours: PaCM model file (default: the analytic draft score alone)")
    p.add_argument("--draft", help="ours: learned draft model file")
    p.add_argument("--search-device", help="ours: device constants the analytic draft ranks the search with "
                                           "(default: the checkpoint's)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--trials", type=int, default=200, help="all tasks together (ResNet-18 has 19)")
    budget.add_argument("--trials-per-task", type=int, help="instead of --trials: this many times the network's "
                                                            "kernels (its tuning tasks)")
    p.add_argument("--trials-per-batch", type=int, default=8)
    p.add_argument("--population", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--work-dir", type=Path, help="default: a temporary directory")
    args = p.parse_args()
    torch.set_num_threads(1)  # the cost model's torch work stays off the cores the measurements use

    program = named_network(args.network)
    network = torch_network(program, args.network)
    mod = inference_module(network)
    target = tuning_target("llvm", args.cores)
    if args.trials_per_task:
        args.trials = args.trials_per_task * len(network_kernels(mod, target, args.network))
    base = TuneSettings(trials=args.trials, trials_per_batch=args.trials_per_batch, population_size=args.population,
                        seed=args.seed, num_cores=args.cores, checkpoint=args.checkpoint,
                        pruner=PrunerSettings(draft=args.draft, search_device=args.search_device),
                        measure=MeasureSettings(build_workers=args.cores))
    reports, compiled = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.work_dir or Path(tmp)
        for cost_model in ("pruner", "xgb"):
            s = base if cost_model == "pruner" else replace(base, cost_model="xgb", checkpoint=None,
                                                            pruner=PrunerSettings())
            # a fresh run each time: tune would continue a database left in the directory
            shutil.rmtree(root / cost_model, ignore_errors=True)
            reports[cost_model], compiled[cost_model] = tune_network(network, root / cost_model, s)
            print(f"{cost_model}: {reports[cost_model].to_json()}", flush=True)
    compiled["untuned"] = CompiledNetwork(compile_relax(MemoryDatabase(), mod, target, None), target)
    inputs = network_inputs(network, args.seed)
    retimed = retimed_s(compiled, inputs)
    torch_s = min(torch_latency_s(program, inputs, threads) for threads in (1, args.cores))

    print(f"{args.network}, {args.trials} trials in all, batches of {args.trials_per_batch}, population "
          f"{args.population}, seed {args.seed}")
    print(f"{'':<12}{'e2e ms':>9}{'in-run ms':>11}{'search s':>10}{'model s':>9}{'compile s':>11}{'trials':>8}"
          f"{'tasks tuned':>13}")
    for name, r in reports.items():
        tuned = sum(t.trials > 0 for t in r.tasks)
        print(f"{name:<12}{1e3 * retimed[name]:>9.2f}{1e3 * r.end_to_end_latency_s:>11.2f}{r.search_seconds:>10.1f}"
              f"{r.cost_model_seconds:>9.2f}{r.compile_seconds:>11.1f}{r.trials:>8}{tuned:>8}/{len(r.tasks)}")
    print(f"{'untuned':<12}{1e3 * retimed['untuned']:>9.2f}")
    print(f"{'torch eager':<12}{1e3 * torch_s:>9.2f}")
    ours, xgb = reports["pruner"], reports["xgb"]
    print(f"end-to-end latency xgb/ours: {retimed['xgb'] / retimed['pruner']:.2f}x  "
          f"search seconds xgb/ours: {xgb.search_seconds / ours.search_seconds:.2f}x  "
          f"cost-model seconds ours/xgb: {ours.cost_model_seconds / max(xgb.cost_model_seconds, 1e-9):.2f}")
    print(dumps({"network": args.network, "trials": args.trials, "retimed_s": retimed, "torch_eager_s": torch_s,
                 "runs": [asdict(r) for r in reports.values()]}))


if __name__ == "__main__":
    main()
