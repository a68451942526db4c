"""A whole network as a frontend hands it over (torch_export.py, onnx_model.py), and the kernels
MetaSchedule tunes in it: one task per fused kernel, extracted as compile_relax will look them up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.relax_integration import extract_tasks

from ...errors import BadInput


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
