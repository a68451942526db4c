"""Tuning a whole network: a Relax module from a frontend (torch.export in networks.py, ONNX in
onnx_network.py) -> one task per fused kernel, all tuned with one shared cost model under the
gradient task scheduler -> compiled with the tuned database -> its end-to-end latency measured, and
its output checked against the source framework's own."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import torch
import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.relax_integration import compile_relax, extract_tasks

from ..errors import BadInput, dumps
from ..targets import tuning_target
from ..measure.session import check_measurable, run_measurers
from .context import make_context
from .logs import run_logger, tuning_loggers
from .resume import learn_past, open_database, past_trials
from .run import cost_breakdown, cost_seconds, make_cost_model, make_strategy
from .settings import TuneSettings
from .timing import TaskBests, TimedCostModel


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


@dataclass(frozen=True)
class Network:
    """A whole network as a frontend imported it, and how its own framework computes it."""

    name: str
    mod: tvm.IRModule  # Relax, weights bound as constants
    reference: Callable[[Sequence], list]  # inputs -> the source framework's outputs (any nesting)
    example_inputs: Optional[list] = None  # saved with the network; else seeded random ones of its shapes


def inference_module(network: Network) -> tvm.IRModule:
    """The network's module for inference; static shapes only."""
    for param in network.mod["main"].params:
        shape = getattr(param.ty, "shape", None)
        if shape is None or not all(isinstance(d, tvm.tirx.IntImm) for d in shape.values):
            raise BadInput(f"{network.name}: input {param.name} has a dynamic shape; MetaSchedule tunes static "
                           f"shapes (export without dynamic_shapes; for ONNX give --input-shape)")
    # Inference batch norm as a scale and shift that fuses into the convolution before it, as every
    # deployment compiler does; as an op of its own it would be a task per convolution more.
    inference = [relax.transform.FoldBatchnormToConv2D(), relax.transform.DecomposeOpsForInference()]
    return tvm.transform.Sequential(inference)(network.mod)


def _fused(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    # The preparation compile_relax applies before it looks kernels up in the database: tasks must
    # be extracted from the same fused functions, or the tuned records would never match.
    passes = [*relax.pipeline.library_dispatch_passes(target), relax.transform.LegalizeOps(),
              relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(), relax.transform.FuseOps(),
              relax.transform.FuseTIR()]
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential(passes)(mod)


def network_kernels(mod: tvm.IRModule, target: tvm.target.Target, name: str) -> list[ms.ExtractedTask]:
    """The kernels to tune of an inference module (inference_module), each once with its weight
    (how many times the network calls it); BadInput when there are none."""
    extracted = [t for t in extract_tasks(_fused(mod, target), target)
                 if not t.dispatched[0].attrs.get("tirx.is_scheduled", False)]  # nothing left to tune in those
    if not extracted:
        raise BadInput(f"{name}: no kernels to tune in it")
    return extracted


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
    check_measurable(s.target_kind, s.measure, "tune")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    target = tuning_target(s.target_kind, s.num_cores)
    name = network.name
    mod = inference_module(network)
    extracted = network_kernels(mod, target, name)
    loggers = tuning_loggers(work_dir, [t.task_name for t in extracted], quiet)
    database, notes = open_database(work_dir)
    for note in notes:
        run_logger().warning(note)
    model = TimedCostModel(make_cost_model(s))  # one model learns from every task's measurements
    contexts = [make_context(t.dispatched[0], target, num_threads=s.num_cores,
                             seed=None if s.seed is None else s.seed + i, logger=logger,
                             population_size=s.population_size, task_name=t.task_name,
                             strategy=make_strategy(s, model.inner))
                for i, (t, logger) in enumerate(zip(extracted, loggers))]
    past = past_trials(database, contexts)
    resumed = sum(p.trials for p in past)
    bests = TaskBests([(p.trials, p.best_s) for p in past])
    left = s.trials - resumed
    if resumed:
        run_logger().info("resuming: %d trials measured before in %s, %d left of --trials %d", resumed, work_dir,
                          max(left, 0), s.trials)
    start = time.perf_counter()
    if left > 0:
        for context, p in zip(contexts, past):
            learn_past(model, context, p)
        with run_measurers(s.measure) as (builder, runner):
            ms.tune.tune_tasks(
                tasks=contexts, task_weights=[float(t.weight) for t in extracted], work_dir=str(work_dir),
                max_trials_global=left, num_trials_per_iter=s.trials_per_batch, builder=builder,
                runner=runner, database=database, cost_model=model,
                measure_callbacks=ms.measure_callback.MeasureCallback.create("default") + [bests],
                task_scheduler=ms.task_scheduler.GradientBased(seed=-1 if s.seed is None else s.seed))
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
        work_dir=str(work_dir), resumed_trials=resumed)
    return report, compiled
