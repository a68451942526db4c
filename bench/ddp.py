"""Two CPU processes (Lightning DDP) against one: does the model come out as good?

    PYTHONPATH=. python bench/ddp.py [--seeds 0 1 2 3 4 5] [--max-epochs 50]

Runs `pruner-train pretrain --model pacm` on the bundled tenset-mini (TenSet's within-task split),
once with `--devices 1` and once with `--accelerator cpu --devices 2 --strategy ddp`, per seed, each
in its own process as a user would. The recipe's batch size is the global batch, so both take the
same optimizer steps per epoch, and each step of the two processes is the one a single process
takes on the same global batch (tests/test_across_ranks.py): the runs differ in which records make
up a batch. Prints test peak@1/@5 and pairwise accuracy per seed, the mean difference with its
standard error over seeds, and the wall seconds of each run (a busy 2-core machine: compare them
only within a line).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(out: Path, seed: int, epochs: int, ddp: bool) -> dict:
    cmd = [sys.executable, "-m", "pruner_offline.cli", "pretrain", "--model", "pacm", "--seed", str(seed),
           "--max-epochs", str(epochs), "--out", str(out), "--json", "--quiet", "--accelerator", "cpu"]
    cmd += ["--devices", "2", "--strategy", "ddp"] if ddp else ["--devices", "1"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])["pacm"]
    return {**result, "wall_seconds": time.perf_counter() - start}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    ap.add_argument("--max-epochs", type=int, default=50)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            one = run(Path(tmp) / f"one{seed}", seed, args.max_epochs, ddp=False)
            two = run(Path(tmp) / f"ddp{seed}", seed, args.max_epochs, ddp=True)
            rows.append((seed, one, two))
            print(f"seed {seed}: 1 process peak@1 {one['peak@1']:.3f} @5 {one['peak@5']:.3f} pairwise "
                  f"{one['pairwise_acc']:.3f} ({one['wall_seconds']:.0f} s) | 2 processes peak@1 {two['peak@1']:.3f} "
                  f"@5 {two['peak@5']:.3f} pairwise {two['pairwise_acc']:.3f} ({two['wall_seconds']:.0f} s)", flush=True)
    diff = [two["peak@1"] - one["peak@1"] for _, one, two in rows]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    # a seed's test split is 103 records of 13 tasks: one run's peak@1 moves by a few hundredths
    # with the order of its batches alone, so the mean difference comes with its error
    stderr = lambda xs: (sum((x - mean(xs)) ** 2 for x in xs) / max(len(xs) - 1, 1) / len(xs)) ** 0.5  # noqa: E731
    print(f"mean peak@1: 1 process {mean([o['peak@1'] for _, o, _ in rows]):.3f}, "
          f"2 processes {mean([t['peak@1'] for _, _, t in rows]):.3f}; "
          f"difference (2 - 1) mean {mean(diff):+.3f}, min {min(diff):+.3f}, standard error {stderr(diff):.3f}; "
          f"pairwise accuracy difference mean {mean([t['pairwise_acc'] - o['pairwise_acc'] for _, o, t in rows]):+.3f}")
    print(f"goal (2 processes within 0.02 peak@1 of one, mean over seeds): "
          f"{'met' if mean(diff) >= -0.02 else 'NOT met'}")


if __name__ == "__main__":
    main()
