"""Memory and speed of one PaCM training epoch as the store grows: out-of-core against in-memory.

    PYTHONPATH=. python bench/scale.py [--sizes 0.1 1] [--with-10m] [--batch 512] [--no-in-memory-above 5]
                                       [--max-batches N] [--write]

SCALE ONLY: the stores are the featurized records of the bundled tenset-mini replicated to
0.1 M, 1 M (and, with --with-10m, 10 M, ~7 GB on disk) records, the copies merged into tasks of
about TenSet's size (~3,700 records a task). The copies carry no new information, so no accuracy is read from them.
They are written chunk by chunk into a temporary directory, removed afterwards. ``--write`` also
times the store writer (what featurize and merge end with) over as many copies of the record files,
each loaded only when it is written.

Each measurement runs in a fresh process: store setup (split, scales), then one epoch of PaCM
training on CPU. Prints peak RSS, samples/s, and the ratios of the out-of-core path to the
in-memory one measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


# TenSet: 51.6 M records of 2,308 tasks on 6 devices, ~3,700 records a task file
TENSET_RECORDS_PER_TASK = 3700


def replicate(source: Path, out: Path, copies: int) -> int:
    """Write ``copies`` of the store ``source`` to ``out``, a block of copies at a time; the number
    of records. Copies are merged into tasks (and their files) of about TenSet's records per task:
    each copy of a task is another run of positions in it, so the table of tasks and files grows
    with the records as TenSet's does, not with the copies."""
    import h5py

    from pruner_offline.store.reader import FeatureStore
    from pruner_offline.store.schema import INDEX_DATASETS, STATEMENT_ARRAYS
    from pruner_offline.store.writer import chunk_shape

    d = FeatureStore(source).load()
    rec = d.records
    n, s = d.n_records, int(rec["stmt_offset"][-1])
    n_tasks, n_files = len(d.task_keys), len(d.file_paths)
    per_task = max(1, round(TENSET_RECORDS_PER_TASK / (n / n_tasks)))  # copies merged into one task
    groups = -(-copies // per_task)
    task_size = np.zeros(n_tasks, np.int64)
    np.maximum.at(task_size, rec["task_id"], rec["position"].astype(np.int64) + 1)
    file_lines = np.zeros(n_files, np.int64)
    np.maximum.at(file_lines, rec["file_id"], rec["line"].astype(np.int64))
    # what copy c adds to a column: (its group's) task and file ids; (its slot's) positions and lines
    shift = {"task_id": lambda c: c // per_task * n_tasks, "file_id": lambda c: c // per_task * n_files,
             "position": lambda c: c % per_task * task_size[rec["task_id"]],
             "line": lambda c: c % per_task * file_lines[rec["file_id"]]}
    with h5py.File(source, "r") as src, h5py.File(out, "w") as f:
        f.attrs.update(dict(src.attrs))

        def dataset(name: str, x: np.ndarray, per_copy: int):
            # chunked and compressed as store/writer.py writes a store of this size
            shape = (per_copy * copies, *x.shape[1:])
            return f.create_dataset(name, shape=shape, dtype=x.dtype, chunks=chunk_shape(shape, x.dtype.itemsize),
                                    compression="lzf")

        arrays = {f"records/{k}": v for k, v in rec.items() if k != "stmt_offset"}
        arrays.update({k: getattr(d, k) for k in ("statements", "symbols", "dataflow", "steps")})
        targets = {k: dataset(k, x, s if k in STATEMENT_ARRAYS else n) for k, x in arrays.items()}
        # blocks of many copies: a write of part of a compressed chunk rereads and recompresses it
        block = max(1, min(copies, 2**27 // max(x[:1].nbytes * n for x in arrays.values())))
        for k, x in arrays.items():
            rows = len(x)
            field = k.rpartition("/")[2]
            for c in range(0, copies, block):
                m = min(block, copies - c)
                tiled = np.concatenate([(x + shift[field](c + i)).astype(x.dtype) if field in shift else x
                                        for i in range(m)])
                targets[k][c * rows:(c + m) * rows] = tiled
        counts = np.tile(rec["stmt_offset"][1:] - rec["stmt_offset"][:-1], copies)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        f.create_dataset("records/stmt_offset", data=offsets, chunks=chunk_shape(offsets.shape, 8), compression="lzf")
        in_group = np.minimum(per_task, copies - np.arange(groups) * per_task)  # copies in each group
        for group, names in INDEX_DATASETS.items():
            for name in names:
                x = src[f"{group}/{name}"][...]
                if group == "failures":
                    x = x[:0]
                elif (group, name) in (("tasks", "key"), ("files", "path"), ("files", "task")):
                    x = np.array([v + f"#copy{g}".encode() for g in range(groups) for v in x], dtype=object)
                elif (group, name) == ("files", "index"):
                    x = np.arange(n_files * groups)
                elif (group, name) == ("files", "records_read"):
                    x = np.concatenate([x * k for k in in_group])
                else:
                    x = np.concatenate([x] * groups)
                f.create_dataset(f"{group}/{name}", data=x, dtype=src[f"{group}/{name}"].dtype)
    return n * copies


def one(store: str, in_memory: bool, batch: int, max_batches: int = 0) -> dict:
    """Setup and one training epoch (or its first ``max_batches``) in this process; its own peak RSS."""
    import torch

    from pruner_offline.training.data import StoreDataModule
    from pruner_offline.training.module import CostModelModule

    torch.manual_seed(0)
    start = time.perf_counter()
    dm = StoreDataModule(store, batch_size=batch, in_memory=in_memory)
    dm.setup("fit")
    setup = time.perf_counter() - start
    module = CostModelModule(model="pacm")
    module.set_scales(dm.scales)
    opt = module.configure_optimizers()
    module.train()
    samples = 0
    start = time.perf_counter()
    for i, b in enumerate(dm.train_dataloader()):
        if max_batches and i == max_batches:
            break
        loss = module.loss_fn(module(b), b.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        samples += b.size
    seconds = time.perf_counter() - start
    return {"setup_s": setup, "epoch_s": seconds, "samples": samples, "samples_per_s": samples / seconds,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def write(source: str, copies: int, out: str) -> dict:
    """The store writer (the step featurize and merge end with) over ``copies`` of the record files
    of ``source``, each loaded only when it is written; its speed and this process's peak RSS."""
    from dataclasses import replace

    from pruner_offline.store.reader import FeatureStore
    from pruner_offline.store.schema import LazyUnit, UnitFeatures
    from pruner_offline.store.writer import write_store

    store = FeatureStore(source)
    units = [u for _, u in store.units()]

    def copy_of(unit: LazyUnit, c: int) -> LazyUnit:
        head = replace(unit.header, file=f"{unit.header.file}#copy{c}",
                       workload_key=f"{unit.header.workload_key}#copy{c}")

        def load() -> UnitFeatures:
            return UnitFeatures(head.file, head.device, head.workload_key, head.target_kind, unit.load().arrays,
                                head.failures, head.records_read)
        return LazyUnit(head, load)

    lazy = [(c * len(units) + i, copy_of(u, c)) for c in range(copies) for i, u in enumerate(units)]
    start = time.perf_counter()
    write_store(Path(out), lazy, store.meta, {})
    seconds = time.perf_counter() - start
    n = FeatureStore(out).n_records
    Path(out).unlink()
    return {"seconds": seconds, "records_per_s": n / seconds,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def measure(store: Path, in_memory: bool, batch: int, max_batches: int) -> dict:
    return _run(["--one", str(store), "--batch", str(batch), "--max-batches", str(max_batches)]
                + (["--in-memory"] if in_memory else []))


def _run(args: list[str]) -> dict:
    """This script's ``args`` in a fresh process: its last line, as JSON."""
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if out.returncode:
        return {"failed": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[0.1, 1.0], help="millions of records")
    ap.add_argument("--with-10m", action="store_true", help="also 10 M records (~10 GB of disk)")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--max-batches", type=int, default=0, help="train only the epoch's first N batches "
                    "(a 10 M epoch takes hours on a small CPU); 0: the whole epoch")
    ap.add_argument("--no-in-memory-above", type=float, default=5.0,
                    help="millions of records above which the in-memory path is not tried")
    ap.add_argument("--cache", type=Path, default=REPO / "runs" / "features", help="featurized tenset-mini")
    ap.add_argument("--write", action="store_true", help="also time the store writer (featurize's and "
                    "merge's last step) on each size, and its peak RSS")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--one-write", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--in-memory", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.in_memory, args.batch, args.max_batches)))
        return
    if args.one_write:
        print(json.dumps(write(args.one_write[0], int(args.one_write[1]), args.one_write[2])))
        return
    from pruner_offline.build_store import FeaturizeSettings, cached_store

    source, _ = cached_store(FeaturizeSettings(str(REPO / "datasets" / "tenset-mini")), args.cache)
    from pruner_offline.store.reader import FeatureStore

    n_source = FeatureStore(source).n_records
    sizes = args.sizes + ([10.0] if args.with_10m else [])
    epoch = f"the first {args.max_batches} batches of an epoch" if args.max_batches else "one epoch"
    print(f"SCALE ONLY: tenset-mini ({n_source} records) replicated, in tasks of ~{TENSET_RECORDS_PER_TASK} records "
          "as TenSet's; no accuracy is measured. "
          f"PaCM, {epoch} on CPU, batch {args.batch}")
    print(f"{'records':>9} {'path':<12} {'on disk':>8} {'setup s':>8} {'epoch s':>8} {'samples/s':>10} "
          f"{'peak RSS':>9}  vs in-memory (RSS, speed)")
    first_ooc = None
    with tempfile.TemporaryDirectory(prefix="pruner-scale-") as tmp:
        for millions in sizes:
            store = Path(tmp) / f"scale-{millions}m.h5"
            copies = max(1, round(millions * 1e6 / n_source))
            n = replicate(source, store, copies)
            disk = store.stat().st_size / 2**20
            # the reference first, each line printed when measured: a 1 M epoch takes many minutes
            paths = (["in-memory"] if millions <= args.no_in_memory_above else []) + ["out-of-core"]
            ref = None
            for path in paths:
                r = measure(store, path == "in-memory", args.batch, args.max_batches)
                if "failed" in r:
                    print(f"{n:>9} {path:<12} failed: {r['failed']}", flush=True)
                    continue
                ref = ref or r
                vs = (f"  {r['peak_rss_mb'] / ref['peak_rss_mb']:.2f}x, "
                      f"{r['samples_per_s'] / ref['samples_per_s']:.2f}x" if ref is not r else "")
                print(f"{n:>9} {path:<12} {disk:>6.0f}MB {r['setup_s']:>8.1f} {r['epoch_s']:>8.1f} "
                      f"{r['samples_per_s']:>10.0f} {r['peak_rss_mb']:>7.0f}MB{vs}", flush=True)
                if path == "out-of-core":
                    first_ooc = first_ooc or (n, r)
                    if first_ooc[0] != n:
                        print(f"{'':>9} out-of-core peak RSS at {n} / at {first_ooc[0]} records: "
                              f"{r['peak_rss_mb'] / first_ooc[1]['peak_rss_mb']:.2f}x", flush=True)
            if args.write:
                r = _run(["--one-write", str(source), str(copies), str(store.with_suffix(".written.h5"))])
                print(f"{n:>9} {'writer':<12} " + (f"failed: {r['failed']}" if "failed" in r else
                      f"{r['seconds']:>8.1f}s {r['records_per_s']:>10.0f} records/s, peak RSS {r['peak_rss_mb']:.0f}MB"),
                      flush=True)
            store.unlink()


if __name__ == "__main__":
    main()
