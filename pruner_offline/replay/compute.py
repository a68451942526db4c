"""Rebuild a task's TE compute in today's TVM from the decoded graph, and lower it to a PrimFunc.

Expressions are rebuilt node for node with TIR constructors (no operator overloading) so
that the TIR the replay schedules is the TE program Ansor scheduled, not a simplified one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

import tvm
from tvm.sym import Analyzer
from tvm import te, tirx

from ..tenset import te_graph as g


class ComputeBuildError(ValueError):
    """The decoded graph uses something this rebuild cannot express in today's TVM."""


_BINOPS: dict[str, Callable] = {
    "add": tirx.Add, "sub": tirx.Sub, "mul": tirx.Mul, "div": tirx.Div, "mod": tirx.Mod,
    "floordiv": tirx.FloorDiv, "floormod": tirx.FloorMod, "min": tirx.Min, "max": tirx.Max,
    "eq": tirx.EQ, "ne": tirx.NE, "lt": tirx.LT, "le": tirx.LE, "gt": tirx.GT, "ge": tirx.GE,
    "and": tirx.And, "or": tirx.Or,
}


def _resolve_op(name: str) -> tvm.ir.Op:
    # TIR's operators moved from the "tir." namespace to "tirx." (math) or "prim." (builtins)
    short = name[4:] if name.startswith("tir.") else None
    candidates = [name] + ([f"tirx.{short}", f"prim.{short}"] if short else [])
    for candidate in candidates:
        try:
            return tvm.ir.Op.get(candidate)
        except Exception:  # tvm-ffi raises a plain AttributeError for unknown names
            continue
    raise ComputeBuildError(f"unknown operator {name}")


@dataclass(frozen=True)
class BuiltCompute:
    """The TE tensors of one task, indexed like ``ComputeGraph.ops`` (stage order)."""

    tensors: tuple[te.Tensor, ...]
    args: tuple[te.Tensor, ...]  # the PrimFunc's parameters, in the task's tensor order


def stage_names(graph: g.ComputeGraph) -> list[str]:
    """One distinct name per op, in stage order: the op's own unless an earlier op took it.
    TOPI names every broadcast ``T_add``, so a fused residual chain holds two ``T_add`` stages;
    the replay finds each stage's block by this name, so it must not be ambiguous."""
    taken: set[str] = set()
    names = []
    for op in graph.ops:
        name, n = op.name, 0
        while name in taken:
            n += 1
            name = f"{op.name}_{n}"
        taken.add(name)
        names.append(name)
    return names


def _reads_tensor(e: g.Expr) -> bool:
    return isinstance(e, g.Load) or any(_reads_tensor(c) for c in g.expr_children(e))


class _Builder:
    def __init__(self, graph: g.ComputeGraph):
        self.graph = graph
        self.names = stage_names(graph)
        self.tensors: list[te.Tensor] = []
        self.vars: dict[int, tirx.Var] = {}
        self.analyzer = Analyzer()

    def var(self, v: g.Var) -> tirx.Var:
        if v.uid not in self.vars:
            self.vars[v.uid] = tirx.Var(v.name, v.dtype)
        return self.vars[v.uid]

    def const(self, c: g.Const) -> tirx.PrimExpr:
        if c.dtype.startswith("float"):
            return tirx.FloatImm(c.dtype, float(c.value))
        return tirx.IntImm(c.dtype, int(c.value))

    def expr(self, e: g.Expr) -> tirx.PrimExpr:
        if isinstance(e, g.Var):
            return self.var(e)
        if isinstance(e, g.Const):
            return self.const(e)
        if isinstance(e, g.BinOp):
            return _BINOPS[e.op](self.expr(e.a), self.expr(e.b))
        if isinstance(e, g.Not):
            return tirx.Not(self.expr(e.a))
        if isinstance(e, g.Select):
            return tirx.Select(self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value))
        if isinstance(e, g.Cast):
            return tirx.Cast(e.dtype, self.expr(e.value))
        if isinstance(e, g.Call):
            return tirx.call_intrin(e.dtype, _resolve_op(e.op), *[self.expr(a) for a in e.args])
        if isinstance(e, g.Load):
            # multi-output computes are refused in operation(), so value_index is 0
            return self.tensors[e.op](*[self.expr(i) for i in e.indices])
        if isinstance(e, g.Reduce):
            return self.reduce(e)
        raise ComputeBuildError(f"unsupported expression {type(e).__name__}")

    def bound(self, b: Union[int, g.Expr]) -> tirx.PrimExpr:
        """A loop bound; an adaptive-pooling extent such as ``(i+1)*7 - i*7`` folds to a constant."""
        if isinstance(b, int):
            return tirx.IntImm("int32", b)
        folded = self.analyzer.simplify(self.expr(b))
        if isinstance(folded, tirx.IntImm):
            return folded
        if _reads_tensor(b):  # (printing such an extent makes TVM log a warning per tensor load)
            raise ComputeBuildError("a loop extent depends on tensor values (a sparse operator's reduction over "
                                    "its index buffer), which TIR's block loops cannot express as Ansor's stage did")
        raise ComputeBuildError(f"loop extent is not constant: {folded}")

    def iter_var(self, axis: g.IterAxis) -> tirx.IterVar:
        dom = tvm.ir.Range.from_min_extent(self.bound(axis.min), self.bound(axis.extent))
        kind = tirx.IterVar.CommReduce if axis.kind == "reduce" else tirx.IterVar.DataPar
        return tirx.IterVar(dom, self.var(axis.var), kind)

    def reduce(self, r: g.Reduce) -> tirx.PrimExpr:
        c = r.combiner
        combiner = tirx.CommReducer(
            [self.var(v) for v in c.lhs], [self.var(v) for v in c.rhs],
            [self.expr(x) for x in c.result], [self.expr(x) for x in c.identity])
        return tirx.Reduce(
            combiner, [self.expr(s) for s in r.source], [self.iter_var(a) for a in r.axes],
            self.expr(r.condition), r.value_index, [self.expr(s) for s in r.init])

    def attrs(self, op: g.ComputeOp) -> dict:
        """The ComputeOp attrs today's TVM understands: ``layout_free_placeholders`` becomes the
        PrimFunc's ``layout_free_buffers``; the rest (workload, schedule_rule...) steer only
        the schedulers that wrote them."""
        refs = op.attrs.get("layout_free_placeholders") or ()
        free = [self.tensors[r.op] for r in refs if isinstance(r, g.TensorRef)]
        return {"layout_free_placeholders": free} if free else {}

    def operation(self, op: g.Operation) -> te.Tensor:
        name = self.names[len(self.tensors)]
        if isinstance(op, g.PlaceholderOp):
            return te.placeholder(op.shape, op.dtype, name)
        if len(op.body) != 1:
            raise ComputeBuildError(f"{op.name}: multi-output compute is not supported")
        def body(*idx: tirx.Var) -> tirx.PrimExpr:
            # the body is built over the axis variables te.compute hands out
            self.vars.update((a.var.uid, v) for a, v in zip(op.axes, idx))
            return self.expr(op.body[0])

        shape = [self.bound(a.extent) for a in op.axes]
        return te.compute(shape, body, name=name, tag=op.tag, attrs=self.attrs(op),
                          varargs_names=[a.var.name for a in op.axes])


def build_compute(graph: g.ComputeGraph) -> BuiltCompute:
    b = _Builder(graph)
    for op in graph.ops:
        b.tensors.append(b.operation(op))
    return BuiltCompute(tuple(b.tensors), tuple(b.tensors[r.op] for r in graph.tensors))


def build_prim_func(graph: g.ComputeGraph) -> tirx.PrimFunc:
    """The unscheduled PrimFunc of a task's compute."""
    built = build_compute(graph)
    return te.create_prim_func(list(built.args))
