"""Make the cpu-collect dataset: export the networks below with torch.export, then measure every
task of each with `pruner-train collect` into one collection.

    python datasets/cpu-collect/make.py export WORK          # WORK/networks/*.pt2
    python datasets/cpu-collect/make.py collect WORK         # measure; rerun to continue after a stop
                                                             # (a new WORK starts from the committed collection)
    python datasets/cpu-collect/make.py pack WORK            # WORK/collection -> datasets/cpu-collect/

torchvision is needed only to export (its models with random, seeded weights: tuning and cost
models depend on shapes, not on trained values); it is not a dependency of the package. All
networks go into one collection, so a kernel that two networks share is measured once; collect
records which network each task came from (collect.json, runs[].tasks).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import types
from itertools import zip_longest
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
PROGRAMS_PER_TASK = 48  # the goal; a first pass with fewer spreads a short run over every network
SEED = 0


def _torchvision():
    # PyPI's torchvision wheels register fake kernels for their C++ ops at import, which fails
    # when the ops library does not match the installed torch; the models need none of those ops.
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision.models

    return torchvision.models


class Encoder(nn.Module):
    """A stack of BERT-style encoder layers (the package's built-in BertLayer) of a given width."""

    def __init__(self, hidden: int, heads: int, ffn: int, layers: int = 1):
        super().__init__()
        from pruner_offline.tuning.frontends.torch_export import BertLayer

        self.layers = nn.Sequential(*(BertLayer(hidden, heads, ffn) for _ in range(layers)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class Classifier(nn.Module):
    """A small transformer classifier head: mean-pool, dense + tanh, dense (GEMV at batch 1)."""

    def __init__(self, hidden: int, classes: int):
        super().__init__()
        self.encoder = Encoder(hidden, hidden // 64, 4 * hidden)
        self.pool = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.pool(self.encoder(x).mean(dim=1))))


def _vision(name: str, **kwargs):
    return lambda: getattr(_torchvision(), name)(weights=None, **kwargs)


# name -> (module factory, input shape): TenSet's CPU list (ResNet, MobileNet, BERT, DenseNet,
# Inception, VGG, ...) at several batch sizes and input shapes, plus transformer blocks of
# other widths, so that norms, softmax, GEMV and attention are measured beside GEMM and conv.
NETWORKS = {
    "resnet18-b1-224": (_vision("resnet18"), (1, 3, 224, 224)),
    "resnet18-b4-128": (_vision("resnet18"), (4, 3, 128, 128)),
    "resnet50-b1-224": (_vision("resnet50"), (1, 3, 224, 224)),
    "resnext50-b1-160": (_vision("resnext50_32x4d"), (1, 3, 160, 160)),
    "mobilenet-v2-b1-224": (_vision("mobilenet_v2"), (1, 3, 224, 224)),
    "mobilenet-v2-b8-96": (_vision("mobilenet_v2"), (8, 3, 96, 96)),
    "mobilenet-v3-small-b1-224": (_vision("mobilenet_v3_small"), (1, 3, 224, 224)),
    "densenet121-b1-112": (_vision("densenet121"), (1, 3, 112, 112)),
    "inception-v3-b1-299": (_vision("inception_v3", aux_logits=False, init_weights=False), (1, 3, 299, 299)),
    "vgg11-b1-224": (_vision("vgg11"), (1, 3, 224, 224)),
    "vgg16-b2-112": (_vision("vgg16"), (2, 3, 112, 112)),
    "squeezenet1.1-b1-224": (_vision("squeezenet1_1"), (1, 3, 224, 224)),
    "shufflenet-v2-b1-224": (_vision("shufflenet_v2_x1_0"), (1, 3, 224, 224)),
    "efficientnet-b0-b1-224": (_vision("efficientnet_b0"), (1, 3, 224, 224)),
    "regnet-x-400mf-b1-224": (_vision("regnet_x_400mf"), (1, 3, 224, 224)),
    "convnext-tiny-b1-128": (_vision("convnext_tiny"), (1, 3, 128, 128)),
    "bert-base-b1-128": (lambda: Encoder(768, 12, 3072), (1, 128, 768)),
    "bert-small-b4-64": (lambda: Encoder(512, 8, 2048), (4, 64, 512)),
    "bert-tiny-b1-256": (lambda: Encoder(256, 4, 1024, layers=2), (1, 256, 256)),
    "bert-large-b1-32": (lambda: Encoder(1024, 16, 4096), (1, 32, 1024)),
    "text-classifier-b1-64": (lambda: Classifier(384, 10), (1, 64, 384)),
}
# the package's own networks, exported as `tune --network` exports them
BUILT_IN = ("mlp", "resnet18", "bert-layer")


def export(work: Path, only: list[str]) -> None:
    from pruner_offline.tuning.frontends.torch_export import named_network

    out = work / "networks"
    out.mkdir(parents=True, exist_ok=True)
    for name in only or [*NETWORKS, *BUILT_IN]:
        path = out / f"{name}.pt2"
        if path.exists():
            continue
        torch.manual_seed(SEED)
        if name in NETWORKS:
            make, shape = NETWORKS[name]
            with torch.no_grad():
                program = torch.export.export(make().eval(), (torch.randn(*shape),))
        else:
            program = named_network(name, SEED)
        partial = out / f"{name}.partial.pt2"
        torch.export.save(program, partial)
        partial.rename(path)
        print(f"{path}", flush=True)


def unpack(work: Path) -> None:
    """WORK/collection from the committed one, so that a new machine continues where it stopped."""
    dst = work / "collection"
    dst.mkdir(parents=True)
    for f in sorted((HERE / "collection").iterdir()):
        if f.name.endswith(".json.gz"):
            with gzip.open(f, "rb") as fin, open(dst / f.name[:-3], "wb") as fout:
                shutil.copyfileobj(fin, fout)
        else:
            shutil.copy2(f, dst / f.name)


def collect(work: Path, programs_per_task: int, extra: list[str]) -> None:
    if not (work / "collection").exists() and (HERE / "collection").is_dir():
        unpack(work)
    # convolutional and transformer networks in turn, so that a collection stopped halfway holds both
    cnn = [n for n in NETWORKS if not n.startswith(("bert", "text"))]
    rest = [n for n in [*NETWORKS, *BUILT_IN] if n not in cnn]
    names = [n for pair in zip_longest(cnn, rest) for n in pair if n]
    networks = [work / "networks" / f"{n}.pt2" for n in names]
    missing = [p for p in networks if not p.is_file()]
    if missing:
        sys.exit(f"{missing[0]}: not exported; run `export` first")
    for path in networks:
        print(f"== {path.stem}", flush=True)
        command = ["pruner-train", "collect", "--exported-program", str(path), "--target", "llvm",
                   "--programs-per-task", str(programs_per_task), "--seed", str(SEED),
                   "--out", str(work / "collection"), *extra]
        subprocess.run(command, check=True)


# a task's kind, from the name Relax gives its fused function: the first of these words in it
KINDS = (("conv2d", "convolution"), ("matmul", "matmul / dense"), ("softmax", "softmax"),
         ("layer_norm", "layer norm"), ("pool", "pooling"), ("mean", "reduction"), ("sum", "reduction"),
         ("gelu", "elementwise"), ("multiply", "elementwise"), ("add", "elementwise"), ("relu", "elementwise"),
         ("sigmoid", "elementwise"), ("tanh", "elementwise"), ("transpose", "data movement"),
         ("reshape", "data movement"), ("split", "data movement"), ("concat", "data movement"))


def kind_of(task: str, shapes: list[list[int]]) -> str:
    """The kind of a task from its name, and for convolutions and matmuls from its buffers' shapes
    (``shapes``: the PrimFunc's parameters, the output last), as Relax lays them out from PyTorch:
    data NCHW and weight OIHW; a matmul's inputs batch-first."""
    kind = next((kind for word, kind in KINDS if word in task), "other")
    if kind == "convolution" and len(shapes) >= 3 and len(shapes[0]) == len(shapes[1]) == 4:
        (_, c, h, _), (_, per_group, kh, _), out = shapes[0], shapes[1], shapes[-1]
        if per_group == 1 < c:
            return "convolution, depthwise"
        if per_group < c:
            return "convolution, grouped"
        if len(out) == 4 and out[2] * 2 <= h:
            return "convolution, strided"
        return "convolution, 1x1" if kh == 1 else "convolution"
    if kind == "matmul / dense" and len(shapes) >= 3:
        a, b = shapes[0], shapes[1]
        if len(a) >= 3 and len(b) >= 3 and a[0] > 1 and b[0] > 1:
            return "batched matmul (attention)"
        rows = 1
        for d in a[:-1]:
            rows *= d
        return "matmul / dense, GEMV" if rows == 1 else kind
    return kind


def workload_shapes(collection: Path) -> list[list[list[int]]]:
    """Each workload's parameter shapes, in the order of database_workload.json."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.database import Workload

    with open(collection / "database_workload.json") as f:
        mods = [Workload.from_json(json.loads(line)).mod for line in f if line.strip()]
    return [[[int(d) for d in a.shape] for a in ArgInfo.from_prim_func(m["main"])] for m in mods]


def summary(collection: Path) -> str:
    """Markdown tables of what the collection holds: by kind of kernel, and by network."""
    manifest = json.loads((collection / "collect.json").read_text())
    tasks = {t["workload"]: t for run in manifest["runs"] for t in run.get("tasks", [])}
    networks: dict[str, set] = {}
    for run in manifest["runs"]:
        for t in run.get("tasks", []):
            networks.setdefault(Path(t["origin"]).stem, set()).add(t["workload"])
    with open(collection / "database_workload.json") as f:
        hashes = [json.loads(line)[0] for line in f if line.strip()]
    held, failed = [0] * len(hashes), [0] * len(hashes)
    with open(collection / "database_tuning_record.json") as f:
        for line in f:
            if line.strip():
                index, (_, secs, *_) = json.loads(line)
                held[index] += 1
                failed[index] += not all(0 < s < 1e9 for s in secs)
    by_kind: dict[str, list[int]] = {}
    for i, (h, shapes) in enumerate(zip(hashes, workload_shapes(collection))):
        row = by_kind.setdefault(kind_of(tasks[h]["name"], shapes) if h in tasks else "other", [0, 0, 0])
        row[0] += 1
        row[1] += held[i]
        row[2] += failed[i]
    lines = ["| kind of kernel | tasks | programs | failed |", "|---|---|---|---|"]
    lines += [f"| {k} | {t} | {n} | {x} |" for k, (t, n, x) in sorted(by_kind.items(), key=lambda kv: -kv[1][1])]
    lines += [f"| **all** | **{len(hashes)}** | **{sum(held)}** | **{sum(failed)}** |", "",
              "| network | tasks | programs |", "|---|---|---|"]
    count = dict(zip(hashes, held))
    lines += [f"| {n} | {len(ws)} | {sum(count.get(w, 0) for w in ws)} |" for n, ws in networks.items()]
    return "\n".join(lines)


def pack(work: Path) -> None:
    """The collection with its database gzipped, as info, featurize and pretrain read it."""
    src = work / "collection"
    dst = HERE / "collection"
    dst.mkdir(exist_ok=True)
    # tuning records before workloads (sorted order), and whole lines only: a pack taken while collect
    # appends holds no torn line and no record whose workload it lacks
    for f in sorted(src.iterdir()):
        if f.suffix == ".json" and f.name.startswith("database_"):
            data = f.read_bytes()
            with gzip.open(dst / f"{f.name}.gz", "wb", compresslevel=9) as fout:
                fout.write(data[:data.rfind(b"\n") + 1])
        elif f.is_file():
            shutil.copy2(f, dst / f.name)
    print(f"{dst}: {sum(f.stat().st_size for f in dst.iterdir()) / 2**20:.1f} MiB")
    print(summary(src))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=("export", "collect", "pack"))
    p.add_argument("work", type=Path, help="working directory (networks, the collection being measured)")
    p.add_argument("--only", nargs="*", default=[], help="export: these networks only")
    p.add_argument("--programs-per-task", type=int, default=PROGRAMS_PER_TASK,
                   help="collect: programs per task (a rerun with more adds to the tasks measured before)")
    args, extra = p.parse_known_args()
    if args.step == "export":
        export(args.work, args.only)
    elif args.step == "collect":
        collect(args.work, args.programs_per_task, extra)
    else:
        pack(args.work)


if __name__ == "__main__":
    main()
