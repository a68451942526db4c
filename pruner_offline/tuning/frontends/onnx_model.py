"""Whole networks to tune from an ONNX file (the `onnx` extra), imported with TVM's Relax ONNX frontend
and checked against onnx's own reference evaluator.

The file is untrusted input: it is parsed and validated by onnx (whose loader keeps external weight
files inside the model's directory), and every input must have a static shape, from the file or
from the caller, before TVM sees it.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np

from ...errors import BadInput
from .network import Network

INSTALL = "pip install 'pruner-offline[onnx]'"


def _onnx():
    # Imported here: onnx is an optional extra, and TVM's ONNX frontend imports it when imported.
    try:
        import onnx
        import onnx.reference
    except ImportError:
        raise BadInput(f"reading ONNX models needs the onnx package, an optional extra: {INSTALL}") from None
    return onnx


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _static_shapes(graph, path: Path, shapes: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
    """Every graph input's shape: the file's where it has one, the caller's where given (it must agree
    with the file's fixed dims); an input left with a symbolic or unknown dim is refused."""
    weights = {t.name for t in graph.initializer}  # older exporters list the weights as inputs too
    inputs = [i for i in graph.input if i.name not in weights]
    unknown = sorted(set(shapes) - {i.name for i in inputs})
    if unknown:
        raise BadInput(f"{path}: --input-shape names {', '.join(unknown)}, not inputs of the model "
                       f"(its inputs: {', '.join(i.name for i in inputs)})")
    out = {}
    for i in inputs:
        tensor = i.type.tensor_type
        dims = ([d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim]
                if tensor.HasField("shape") else None)
        given = shapes.get(i.name)
        if given is not None:
            if dims is not None and (len(dims) != len(given) or any(
                    isinstance(d, int) and d != g for d, g in zip(dims, given))):
                raise BadInput(f"{path}: --input-shape {i.name}={'x'.join(map(str, given))} does not fit the "
                               f"model's shape {dims} for it")
            out[i.name] = list(given)
        elif dims is None or not all(isinstance(d, int) and d > 0 for d in dims):
            example = "x".join(str(d) if isinstance(d, int) and d > 0 else "1" for d in dims) if dims else "D1xD2x..."
            raise BadInput(f"{path}: input {i.name} has a dynamic shape {dims if dims else '(unknown rank)'}; "
                           f"MetaSchedule tunes static shapes: give it one, e.g. --input-shape {i.name}={example}")
        else:
            out[i.name] = dims
    return out


def onnx_network(path: str | Path, shapes: Optional[Mapping[str, Sequence[int]]] = None) -> Network:
    """The ONNX model in `path` as a Relax module with its weights bound as constants; `shapes`
    (input name -> dims) fixes the inputs whose shapes the file leaves symbolic."""
    onnx = _onnx()
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no such file")
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except Exception as exc:  # protobuf's DecodeError, the checker's ValidationError, a bad external data path
        raise BadInput(f"{path}: not a valid ONNX model ({_first_line(exc)})") from None
    static = _static_shapes(model.graph, path, shapes or {})
    from tvm.relax.frontend.onnx import from_onnx

    # The frontend prints the failing node to stdout, where the CLI's JSON line goes; the error says it too.
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # the checker's and the unknown-dims warnings: both settled above
        try:
            mod = from_onnx(model, shape_dict=static)
        except Exception as exc:  # the frontend raises anything (OpNotImplemented, TypeError) on what it lacks
            raise BadInput(f"{path}: TVM's Relax ONNX frontend cannot import it: {type(exc).__name__}: "
                           f"{_first_line(exc)}") from None
    evaluator = onnx.reference.ReferenceEvaluator(model)

    def reference(inputs):
        return evaluator.run(None, {name: np.asarray(x) for name, x in zip(static, inputs)})

    return Network(str(path), mod, reference)
