"""Tuning a whole network: a Relax module from a frontend (frontends/) -> one task per fused kernel,
all tuned by the one driver (tasks.py) with one shared cost model under the gradient task
scheduler -> compiled with the tuned database -> its end-to-end latency measured, and its output
checked against the source framework's own."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch
import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.relax_integration import compile_relax

from ...errors import dumps
from ...measure.measurers import check_measurable
from ..cost_model.timed import cost_breakdown, cost_seconds
from ..frontends.network import Network, inference_module, network_kernels
from ..measure_callback.curves import TaskBests
from ..settings import TuneSettings
from .tasks import Task, TuningRun, run_target


@dataclass(frozen=True)
class TaskResult:
    name: str
    weight: int  # how many times the network calls this kernel
    trials: int
    best_latency_s: Optional[float]  # None when no candidate ran


@dataclass(frozen=True)
class NetworkReport:
    network: str
    target: str
    cost_model: str
    trials: int
    end_to_end_latency_s: float  # median over repeats of one inference of the compiled network
    output_max_abs_error: float  # compiled network vs its framework (torch, onnx's reference), example input
    tasks: list[TaskResult]
    search_seconds: float
    cost_model_seconds: float  # as TuneReport's, all tasks
    cost_model_cpu_seconds: float
    cost_model_breakdown: dict[str, float]
    compile_seconds: float
    seed: Optional[int]
    work_dir: str
    resumed_trials: int = 0  # measured by earlier runs of work_dir (resume.py), counted in trials and tasks

    def to_json(self) -> str:
        return dumps(asdict(self), sort_keys=True)


def network_inputs(network: Network, seed: int) -> list:
    """The network's saved example input, or (none saved) a seeded random one of its shapes."""
    if network.example_inputs is not None:
        return network.example_inputs
    generator = torch.Generator().manual_seed(seed)
    out = []
    for param in network.mod["main"].params:
        shape = [int(d) for d in param.ty.shape.values]
        dtype = getattr(torch, str(param.ty.dtype))
        out.append(torch.randn(shape, generator=generator).to(dtype) if dtype.is_floating_point
                   else torch.randint(0, 2, shape, generator=generator).to(dtype))
    return out


def _flat(outputs) -> list[np.ndarray]:
    """A network's outputs, torch's or the VM's, nested tuples flattened, as numpy arrays."""
    if isinstance(outputs, (list, tuple, tvm.ir.Array)):
        return [a for o in outputs for a in _flat(o)]
    return [outputs.numpy() if isinstance(outputs, (torch.Tensor, tvm.runtime.Tensor)) else np.asarray(outputs)]


class CompiledNetwork:
    """A compiled network on its device, called with numpy/torch inputs."""

    def __init__(self, executable: relax.VMExecutable, target: tvm.target.Target):
        self.device = tvm.cuda(0) if target.kind.name == "cuda" else tvm.cpu(0)
        self.vm = relax.VirtualMachine(executable, self.device)

    def _args(self, inputs: Sequence) -> list[tvm.runtime.Tensor]:
        return [tvm.runtime.tensor(np.ascontiguousarray(torch.as_tensor(x).numpy()), self.device) for x in inputs]

    def __call__(self, inputs: Sequence) -> list[np.ndarray]:
        return _flat(self.vm["main"](*self._args(inputs)))

    def latency_s(self, inputs: Sequence, repeat: int = 5, min_repeat_ms: int = 200) -> float:
        timer = self.vm.time_evaluator("main", self.device, repeat=repeat, min_repeat_ms=min_repeat_ms)
        return float(np.median(timer(*self._args(inputs)).results))


def tune_network(network: Network, work_dir: str | Path, s: TuneSettings,
                 quiet: bool = False) -> tuple[NetworkReport, CompiledNetwork]:
    """Tune every kernel of `network` until work_dir's database holds s.trials trials of them in all
    (a rerun continues an earlier run, resume.py), compile it with the best ones, measure it; the
    database and per-task logs go to work_dir (with ``quiet``, only there)."""
    check_measurable(s.target_kind, s.measure, "tune")  # before the extraction, which takes a while
    name = network.name
    mod = inference_module(network)
    extracted = network_kernels(mod, run_target(s), name)
    run = TuningRun([Task(t.task_name, t.dispatched[0], float(t.weight)) for t in extracted], work_dir, s, quiet)
    model, target, database, work_dir = run.model, run.target, run.database, run.work_dir
    bests = TaskBests([(p.trials, p.best_s) for p in run.past])
    start = time.perf_counter()
    run.tune([bests], ms.task_scheduler.GradientBased(seed=-1 if s.seed is None else s.seed))
    search_s = time.perf_counter() - start
    start = time.perf_counter()
    compiled = CompiledNetwork(compile_relax(database, mod, target, params=None), target)
    compile_s = time.perf_counter() - start
    inputs = network_inputs(network, s.seed or 0)
    expected = _flat(network.reference(inputs))
    got = compiled(inputs)
    if [g.shape for g in got] != [e.shape for e in expected]:
        raise RuntimeError(f"{name}: the compiled network's output shapes {[g.shape for g in got]} are not "
                           f"its framework's {[e.shape for e in expected]}")
    error = max(float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64)), initial=0.0))
                for g, e in zip(got, expected))
    report = NetworkReport(
        network=name, target=s.target_kind, cost_model=s.cost_model, trials=sum(bests.trials),
        end_to_end_latency_s=compiled.latency_s(inputs), output_max_abs_error=error,
        tasks=[TaskResult(t.task_name, int(t.weight), n, best if np.isfinite(best) else None)
               for t, n, best in zip(extracted, bests.trials, bests.best_s)],
        search_seconds=round(search_s, 3), cost_model_seconds=cost_seconds(model),
        cost_model_cpu_seconds=cost_seconds(model, cpu=True), cost_model_breakdown=cost_breakdown(model),
        compile_seconds=round(compile_s, 3), seed=s.seed,
        work_dir=str(work_dir), resumed_trials=run.resumed)
    return report, compiled
