"""The 10-dim op-tag embedding: a one-hot of what kind of operator a statement belongs to.

Block names come from TE/TOPI compute names (``conv2d_nchw``, ``T_batch_matmul_NT``,
``DepthwiseConv2d``, ``pool_max``, ``T_softmax_exp``...) and from schedule primitives, which suffix
the producer's name with the scope (``PaddedInput_shared``, ``C_local``), so the name decides first;
the statement's shape decides when the name says nothing (a self-reading update is a reduction, a
store with arithmetic is elementwise, a pure load is injective/padding). The first rule that matches
wins, in this order:

  cache_copy   block named ``*_shared``/``*_local``/``*.shared``..., or a pure copy into shared/local
  winograd     ``winograd``, ``data_pack``, ``bgemm``, ``inverse`` (the winograd stages)
  depthwise    ``depthwise``
  conv         ``conv``
  matmul       ``matmul``, ``dense``, ``gemm``
  pool         ``pool``
  injective    ``pad``, ``reshape``, ``transpose``...
  elementwise  ``softmax``, ``exp``, ``relu``, ``add``, ``multiply``...
  then, by structure:
  reduction    the statement reads the buffer it writes or has a reduction axis (sum, max, mean...)
  elementwise  float arithmetic, max/min or math calls
  injective    a pure load
  other        everything else (constant fills)
"""

from __future__ import annotations

import numpy as np

from .schema import OP_TAGS
from .tir_walk import Statement

_CACHE_SUFFIXES = ("_shared", "_local", ".shared", ".local", "_shared_dyn")
_NAME_RULES = (
    ("winograd", ("winograd", "data_pack", "bgemm", "inverse")),
    ("depthwise", ("depthwise",)),
    ("conv", ("conv",)),
    ("matmul", ("matmul", "dense", "gemm")),
    ("pool", ("pool",)),
    # Before elementwise: "PaddedInput" contains "add".
    ("injective", ("pad", "reshape", "transpose", "layout", "concat", "split", "strided_slice",
                   "take", "squeeze", "expand", "broadcast")),
    ("elementwise", ("softmax", "exp", "relu", "sigmoid", "tanh", "add", "subtract", "multiply",
                     "divide", "bias", "erf", "power", "sqrt", "cast", "clip")),
)


def op_tag(stmt: Statement) -> str:
    name = stmt.block.lower()
    if name.endswith(_CACHE_SUFFIXES) or (stmt.is_copy and stmt.write.scope.startswith(("shared", "local"))):
        return "cache_copy"
    for tag, keys in _NAME_RULES:
        if any(k in name for k in keys):
            return tag
    if stmt.reads_itself or stmt.has_reduce_axis:
        return "reduction"
    if stmt.float_ops + stmt.other_float_ops > 0:
        return "elementwise"
    if stmt.reads:
        return "injective"
    return "other"


def op_tag_embedding(stmts: tuple[Statement, ...]) -> np.ndarray:
    """[n, 10] float32 one-hot rows in OP_TAGS order."""
    out = np.zeros((len(stmts), len(OP_TAGS)), dtype=np.float32)
    for i, stmt in enumerate(stmts):
        out[i, OP_TAGS.index(op_tag(stmt))] = 1.0
    return out
