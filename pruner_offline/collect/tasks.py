"""What to collect programs for: the tasks of a whole network, of TIR modules, or built-in workloads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tvm
import tvm_ffi

from ..errors import BadInput


@dataclass(frozen=True)
class CollectTask:
    name: str
    mod: tvm.IRModule  # one PrimFunc, main
    weight: int = 1  # how many times its network calls it
    origin: str = ""  # the network or file it comes from


def network_tasks(network, target: tvm.target.Target) -> list[CollectTask]:
    """The kernels MetaSchedule would tune in a network (tuning.frontends.network.Network)."""
    from ..tuning.frontends.network import inference_module, network_kernels

    return [CollectTask(t.task_name, t.dispatched[0], int(t.weight), network.name)
            for t in network_kernels(inference_module(network), target, network.name)]


def module_tasks(path: Path) -> list[CollectTask]:
    """One task per TIR module file (TVMScript, or TVM's JSON as .json); a directory: each file in it,
    in name order."""
    from ..tuning.frontends.workloads import load_module

    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")) if path.is_dir() else [path]
    if not files:
        raise BadInput(f"{path}: holds no module files")
    tasks = []
    for f in files:
        try:
            tasks.append(CollectTask(f.stem, load_module(f), 1, str(f)))
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    return tasks


def workload_tasks(names: list[str]) -> list[CollectTask]:
    from ..tuning.frontends.workloads import named_workload

    return [CollectTask(n, named_workload(n), 1, "built-in") for n in names]


def unique_tasks(tasks: list[CollectTask]) -> list[CollectTask]:
    """Each workload once (two layers of a network often share one kernel), weights added up."""
    out: dict[int, CollectTask] = {}
    for t in tasks:
        key = tvm_ffi.structural_hash(t.mod)
        if key in out:
            seen = out[key]
            out[key] = CollectTask(seen.name, seen.mod, seen.weight + t.weight, seen.origin)
        else:
            out[key] = t
    return list(out.values())
