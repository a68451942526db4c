"""What to tune: a few named workloads built with TE, or a user's module from a file."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Callable

import tvm
from tvm import te, tirx

from ...errors import BadInput


def _matmul(m: int, n: int, k: int, *, transpose_b: bool = False) -> tirx.PrimFunc:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((n, k) if transpose_b else (k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    if transpose_b:  # a dense layer stores its weight as [out, in]
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[j, r], axis=r), name="T_dense")
    else:
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def _batch_matmul(batch: int, m: int, n: int, k: int) -> tirx.PrimFunc:
    a = te.placeholder((batch, m, k), name="A")
    b = te.placeholder((batch, k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((batch, m, n), lambda t, i, j: te.sum(a[t, i, r] * b[t, r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def _conv2d(layout: str, n: int, c: int, hw: int, k: int, kernel: int, stride: int, pad: int,
            depthwise: bool = False, groups: int = 1) -> tirx.PrimFunc:
    """A padded 2-D convolution, data and weight in ``NCHW``/``OIHW`` or ``NHWC``/``HWIO``; depthwise:
    one filter per channel (k == c, weight ``C1HW``/``HW1C``), no reduction over channels; groups:
    each output channel reduces over the c / groups input channels of its group."""
    nchw = layout == "NCHW"
    if depthwise and k != c:
        raise ValueError(f"a depthwise convolution keeps the channels: k={k}, c={c}")
    if c % groups or k % groups:
        raise ValueError(f"{groups} groups do not divide the channels: c={c}, k={k}")

    def shape(channels: int, size: int) -> tuple:
        return (n, channels, size, size) if nchw else (n, size, size, channels)

    def at(t: te.Tensor, b, ch, y, x):
        return t[b, ch, y, x] if nchw else t[b, y, x, ch]

    def split(idx: tuple) -> tuple:  # (batch, channel, y, x) from the layout's index order
        return idx if nchw else (idx[0], idx[3], idx[1], idx[2])

    data = te.placeholder(shape(c, hw), name="data")
    w_in = 1 if depthwise else c // groups
    weight = te.placeholder((k, w_in, kernel, kernel) if nchw else (kernel, kernel, w_in, k), name="weight")
    padded_hw = hw + 2 * pad

    def pad_value(*idx):
        b, ci, y, x = split(idx)
        inside = tvm.tirx.all(y >= pad, y < hw + pad, x >= pad, x < hw + pad)
        return tvm.tirx.if_then_else(inside, at(data, b, ci, y - pad, x - pad), tvm.tirx.const(0.0, "float32"))

    padded = te.compute(shape(c, padded_hw), pad_value, name="pad")
    rc = None if depthwise else te.reduce_axis((0, w_in), name="rc")
    ry = te.reduce_axis((0, kernel), name="ry")
    rx = te.reduce_axis((0, kernel), name="rx")

    def conv_value(*idx):
        b, co, y, x = split(idx)
        ci, wi = (co, 0) if depthwise else (rc if groups == 1 else co // (k // groups) * w_in + rc, rc)
        w = weight[co, wi, ry, rx] if nchw else weight[ry, rx, wi, co]
        return te.sum(at(padded, b, ci, y * stride + ry, x * stride + rx) * w,
                      axis=[ry, rx] if depthwise else [rc, ry, rx])

    name = f"{'depthwise_' if depthwise else 'group_' if groups > 1 else ''}conv2d_{layout.lower()}"
    out = te.compute(shape(k, (padded_hw - kernel) // stride + 1), conv_value, name=name)
    return te.create_prim_func([data, weight, out])


def _dense_gelu(m: int, n: int, k: int) -> tirx.PrimFunc:
    """A dense layer with its GELU epilogue fused, as Relax fuses BERT's FFN up-projection."""
    x, w = te.placeholder((m, k), name="A"), te.placeholder((n, k), name="B")
    r = te.reduce_axis((0, k), name="k")
    y = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="T_dense")
    out = te.compute((m, n), lambda i, j: 0.5 * y[i, j] * (1.0 + te.erf(y[i, j] * 0.7071067811865476)), name="T_gelu")
    return te.create_prim_func([x, w, out])


def _softmax(rows: int, cols: int) -> tirx.PrimFunc:
    """Row-wise softmax (attention probabilities): a max, an exp-sum and a divide over each row."""
    x = te.placeholder((rows, cols), name="x")
    k1, k2 = te.reduce_axis((0, cols), name="k1"), te.reduce_axis((0, cols), name="k2")
    top = te.compute((rows,), lambda i: te.max(x[i, k1], axis=k1), name="T_max")
    e = te.compute((rows, cols), lambda i, j: te.exp(x[i, j] - top[i]), name="T_exp")
    total = te.compute((rows,), lambda i: te.sum(e[i, k2], axis=k2), name="T_sum")
    return te.create_prim_func([x, te.compute((rows, cols), lambda i, j: e[i, j] / total[i], name="T_softmax")])


def _layer_norm(rows: int, cols: int) -> tirx.PrimFunc:
    """Layer norm over each row with a scale and a shift: two reductions (sum, sum of squares)."""
    x = te.placeholder((rows, cols), name="x")
    gamma, beta = te.placeholder((cols,), name="gamma"), te.placeholder((cols,), name="beta")
    k1, k2 = te.reduce_axis((0, cols), name="k1"), te.reduce_axis((0, cols), name="k2")
    s1 = te.compute((rows,), lambda i: te.sum(x[i, k1], axis=k1), name="T_sum")
    s2 = te.compute((rows,), lambda i: te.sum(x[i, k2] * x[i, k2], axis=k2), name="T_sum_sq")
    inv = 1.0 / cols

    def norm(i, j):
        mean = s1[i] * inv
        return (x[i, j] - mean) * te.rsqrt(s2[i] * inv - mean * mean + 1e-5) * gamma[j] + beta[j]

    return te.create_prim_func([x, gamma, beta, te.compute((rows, cols), norm, name="T_layer_norm")])


# Shapes: a square GEMM, a ResNet-50 stage-2 3x3 convolution (both layouts), a MobileNet-v2 3x3
# depthwise convolution, BERT-base's FFN up-projection at sequence length 128 and its per-head
# attention scores; then other kinds of kernel: a ResNeXt-style grouped convolution, a fused
# dense + GELU, a GEMV (a batch-1 dense layer: memory-bound), a softmax and a layer norm.
WORKLOADS: dict[str, Callable[[], tirx.PrimFunc]] = {
    "matmul": lambda: _matmul(512, 512, 512),
    "matmul-small": lambda: _matmul(64, 64, 64),
    "conv2d": lambda: _conv2d("NCHW", 1, 64, 56, 64, 3, 1, 1),
    "conv2d-nhwc": lambda: _conv2d("NHWC", 1, 64, 56, 64, 3, 1, 1),
    "depthwise": lambda: _conv2d("NCHW", 1, 144, 56, 144, 3, 1, 1, depthwise=True),
    "dense": lambda: _matmul(128, 3072, 768, transpose_b=True),
    "batch-matmul": lambda: _batch_matmul(12, 128, 128, 64),
    "grouped-conv2d": lambda: _conv2d("NCHW", 1, 128, 28, 128, 3, 1, 1, groups=8),
    "dense-gelu": lambda: _dense_gelu(64, 2048, 512),
    "gemv": lambda: _matmul(1, 2048, 2048, transpose_b=True),
    "softmax": lambda: _softmax(768, 256),
    "layer-norm": lambda: _layer_norm(256, 512),
}

# The same operators at other shapes (other layers of the same networks): tuning runs of these make
# a pretraining set that shares no workload with WORKLOADS (bench/tune.py's "past runs").
OTHER_SHAPES: dict[str, Callable[[], tirx.PrimFunc]] = {
    "matmul-256x1024x256": partial(_matmul, 256, 1024, 256),
    "conv2d-28x128-s1": partial(_conv2d, "NCHW", 1, 128, 28, 128, 3, 1, 1),
    "conv2d-nhwc-14x256-s2": partial(_conv2d, "NHWC", 1, 256, 28, 256, 3, 2, 1),
    "depthwise-28x192-s2": partial(_conv2d, "NHWC", 1, 192, 56, 192, 3, 2, 1, depthwise=True),
    "dense-128x768x3072": partial(_matmul, 128, 768, 3072, transpose_b=True),
    "batch-matmul-12x128x64x128": partial(_batch_matmul, 12, 128, 64, 128),
}


def named_workload(name: str) -> tvm.IRModule:
    try:
        func = (WORKLOADS | OTHER_SHAPES)[name]()
    except KeyError:
        raise BadInput(f"unknown workload {name!r}; built in: {', '.join(WORKLOADS | OTHER_SHAPES)}") from None
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


# `import tvm`, `from tvm.script import tirx as T` and the like: the parser knows T, I and tvm, but
# refuses the import statements a TVMScript file written by hand (or `.script()` output with its
# commented-out imports restored) begins with
_TVM_IMPORT = re.compile(r"^[ \t]*(from[ \t]+tvm(\.\w+)*[ \t]+import[ \t][^\n]*|import[ \t]+tvm(\.\w+)*([ \t]+as[ \t]+\w+)?)[ \t]*$",
                         re.MULTILINE)


def _without_tvm_imports(text: str) -> str:
    """The file's text with its imports of tvm blanked (the lines stay, so errors keep their line numbers)."""
    return _TVM_IMPORT.sub("", text)


def load_module(path: str | Path) -> tvm.IRModule:
    """A TIR module from TVMScript (any suffix but .json) or from TVM's JSON serialization."""
    path = Path(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None
    kind = "TVM's JSON" if path.suffix == ".json" else "TVMScript"
    try:
        # TVM's parsers raise their own errors, and Python's SyntaxError, for a file they cannot read
        obj = tvm.ir.load_json(text) if path.suffix == ".json" else tvm.script.from_source(_without_tvm_imports(text))
    except Exception as exc:  # noqa: BLE001 - a user's file: its error, not ours
        detail = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise ValueError(f"{path}: not {kind} ({type(exc).__name__}: {detail[:200]})") from None
    if isinstance(obj, tirx.PrimFunc):
        obj = tvm.IRModule({"main": obj.with_attr("global_symbol", "main")})
    if not isinstance(obj, tvm.IRModule) or not any(isinstance(f, tirx.PrimFunc) for f in obj.functions.values()):
        raise ValueError(f"{path}: expected a TIR PrimFunc or an IRModule of PrimFuncs, got {type(obj).__name__}")
    names = sorted(gv.name_hint for gv in obj.functions)
    if names != ["main"]:
        # tune tunes one kernel, `main`; any other function would be left out without a word
        raise ValueError(f"{path}: tune takes one PrimFunc named main; this module holds {', '.join(names)} "
                         "(a whole network: --network, --exported-program or --onnx)")
    return obj
