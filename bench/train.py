"""Training throughput (samples/s) and peak memory of PaCM against TenSet-MLP, same data, same run.

    python bench/train.py [--store S.h5 | --data DATASET] [--steps 60] [--batch 512] [--device cpu|cuda]

Each model trains in its own child process (so that peak memory is its own): a warm-up of 5
steps, then ``--steps`` optimizer steps of LambdaRank on batches drawn from the training
split. Prints samples/s, the PaCM/MLP time ratio, and peak memory (RSS on CPU, allocator
peak on CUDA).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one(model: str, store: str, steps: int, batch: int, device: str) -> dict:
    import numpy as np
    import torch

    from pruner_offline.training.data import StoreDataModule
    from pruner_offline.training.module import CostModelModule

    torch.manual_seed(0)
    dm = StoreDataModule(store, batch_size=batch)
    dm.setup("fit")
    module = CostModelModule(model=model).to(device)
    module.set_scales(dm.scales)
    opt = module.configure_optimizers()
    rng = np.random.default_rng(0)
    batches = [dm.gather(rng.choice(dm.train_rows, batch)).to(torch.device(device)) for _ in range(8)]
    module.train()

    def step(i: int) -> None:
        b = batches[i % len(batches)]
        loss = module.loss_fn(module(b), b.y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 0.5)
        opt.step()

    for i in range(5):
        step(i)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak_mb = (torch.cuda.max_memory_allocated() / 2**20 if device == "cuda"
               else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return {"model": model, "samples_per_s": steps * batch / seconds, "peak_mb": peak_mb,
            "params": sum(p.numel() for p in module.parameters())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path)
    ap.add_argument("--data", type=Path, default=REPO / "datasets" / "tenset-mini")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=3, help="alternate the models this often; keep the best")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, str(args.store), args.steps, args.batch, args.device)))
        return
    if args.store is None:
        from pruner_offline.cli.stores import ensure_store

        args.store = ensure_store(args.data, REPO / "runs" / "features", jobs=2, quiet=True)
    results: dict[str, dict] = {}
    for _ in range(args.repeat):  # alternate, so that load from other processes hits both alike
        for model in ("mlp", "pacm"):
            out = subprocess.run([sys.executable, __file__, "--one", model, "--store", str(args.store), "--steps",
                                  str(args.steps), "--batch", str(args.batch), "--device", args.device],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            if model not in results or r["samples_per_s"] > results[model]["samples_per_s"]:
                results[model] = r
    print(f"store {args.store}, batch {args.batch}, {args.steps} steps, device {args.device}, "
          f"best of {args.repeat}")
    for r in results.values():
        print(f"{r['model']:<5} {r['params']:>8} params  {r['samples_per_s']:>10.0f} samples/s  "
              f"peak {r['peak_mb']:.0f} MB")
    ratio = results["mlp"]["samples_per_s"] / results["pacm"]["samples_per_s"]
    print(f"PaCM step time / TenSet-MLP step time: {ratio:.2f}x")


if __name__ == "__main__":
    main()
