"""Decode the TE compute graph inside a task pickle into plain Python, without TVM.

TenSet's task pickles hold a ComputeDAG as ``SaveJSON(tensors)``: a flat list of nodes
that reference each other by index. TVM renamed the node types over the years
(``ComputeOp`` in the 0.8-era files TenSet ships, ``te.ComputeOp`` later), so type keys
are normalised by dropping their namespace before dispatch.

Operations come out in the order Ansor numbers its stages (placeholders included):
record steps address stages by that index, so the order is part of the contract.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field
from typing import Any, Union


class GraphDecodeError(ValueError):
    """The node graph is not a TE compute graph this decoder understands."""


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Var:
    name: str
    dtype: str
    uid: int  # node index: TE allows two variables with one name


@dataclass(frozen=True)
class Const:
    value: Union[int, float]
    dtype: str


@dataclass(frozen=True)
class BinOp:
    op: str  # add sub mul div mod floordiv floormod min max eq ne lt le gt ge and or
    a: "Expr"
    b: "Expr"
    dtype: str


@dataclass(frozen=True)
class Not:
    a: "Expr"
    dtype: str


@dataclass(frozen=True)
class Select:
    condition: "Expr"
    true_value: "Expr"
    false_value: "Expr"
    dtype: str


@dataclass(frozen=True)
class Cast:
    value: "Expr"
    dtype: str


@dataclass(frozen=True)
class Call:
    op: str  # e.g. "tir.exp", "tir.if_then_else"
    args: tuple["Expr", ...]
    dtype: str


@dataclass(frozen=True)
class Load:
    """Read of output ``value_index`` of ``graph.ops[op]``."""

    op: int
    value_index: int
    indices: tuple["Expr", ...]
    dtype: str


@dataclass(frozen=True)
class IterAxis:
    var: Var
    min: Union[int, "Expr"]
    extent: Union[int, "Expr"]  # an expression only where TE allows it (adaptive pooling)
    kind: str  # "spatial" or "reduce"


@dataclass(frozen=True)
class CommReducer:
    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    result: tuple["Expr", ...]
    identity: tuple["Expr", ...]


@dataclass(frozen=True)
class Reduce:
    combiner: CommReducer
    source: tuple["Expr", ...]
    axes: tuple[IterAxis, ...]
    condition: "Expr"
    value_index: int
    init: tuple["Expr", ...]
    dtype: str


Expr = Union[Var, Const, BinOp, Not, Select, Cast, Call, Load, Reduce]


# ---------------------------------------------------------------- operations


@dataclass(frozen=True)
class TensorRef:
    op: int
    value_index: int


@dataclass(frozen=True)
class PlaceholderOp:
    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class ComputeOp:
    name: str
    tag: str
    axes: tuple[IterAxis, ...]
    reduce_axes: tuple[IterAxis, ...]
    body: tuple[Expr, ...]
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.extent for a in self.axes)

    @property
    def dtype(self) -> str:
        return self.body[0].dtype


Operation = Union[PlaceholderOp, ComputeOp]


@dataclass(frozen=True)
class ComputeGraph:
    """A task's compute: ops in Ansor's stage order, and the task's tensors in argument order."""

    ops: tuple[Operation, ...]
    tensors: tuple[TensorRef, ...]


# ---------------------------------------------------------------- traversal


def expr_children(e: Expr) -> tuple:
    """Sub-expressions in TVM's post-order visiting order (which fixes input order)."""
    if isinstance(e, BinOp):
        return (e.a, e.b)
    if isinstance(e, Not):
        return (e.a,)
    if isinstance(e, Select):
        return (e.condition, e.true_value, e.false_value)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Load):
        return e.indices
    if isinstance(e, Reduce):
        return e.source + e.init + (e.condition,)
    return ()


def op_inputs(op: Operation) -> list[int]:
    """Producer ops a compute reads, unique, in TVM's ``InputTensors`` order."""
    if isinstance(op, PlaceholderOp):
        return []
    seen: list[TensorRef] = []
    for root in op.body:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                if isinstance(node, Load):
                    ref = TensorRef(node.op, node.value_index)
                    if ref not in seen:
                        seen.append(ref)
                continue
            stack.append((node, True))
            for child in reversed(expr_children(node)):
                stack.append((child, False))
    return [r.op for r in seen]


# ---------------------------------------------------------------- decoding


_NAMESPACES = ("runtime.", "te.", "tir.", "tirx.", "ir.", "ffi.", "prim.")

_BINOPS = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Mod": "mod",
    "FloorDiv": "floordiv", "FloorMod": "floormod", "Min": "min", "Max": "max",
    "EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge",
    "And": "and", "Or": "or",
}


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


_INT_FOLD = {
    "Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
    "Div": _trunc_div, "Mod": lambda a, b: a - _trunc_div(a, b) * b,
    "FloorDiv": lambda a, b: a // b, "FloorMod": lambda a, b: a % b,
    "Min": min, "Max": max,
    "EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "LT": lambda a, b: a < b,
    "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b,
    "And": lambda a, b: bool(a and b), "Or": lambda a, b: bool(a or b),
}


def _kind(type_key: str) -> str:
    for ns in _NAMESPACES:
        if type_key.startswith(ns):
            return type_key[len(ns):]
    return type_key


class _Nodes:
    """Random access to a legacy SaveJSON node list (``type_key``/``attrs`` form)."""

    def __init__(self, graph: dict):
        nodes = graph.get("nodes")
        if not isinstance(nodes, list) or "root" not in graph:
            if "root_index" in graph:
                raise GraphDecodeError(
                    "graph is in the tvm-ffi JSON format of TVM >= 0.20; "
                    "TenSet task pickles use the SaveJSON format of TVM 0.8-0.19")
            raise GraphDecodeError("not a SaveJSON node graph (no 'root'/'nodes')")
        self.nodes = nodes
        self.root = int(graph["root"])

    def node(self, i: int) -> dict:
        if not 0 <= i < len(self.nodes) or not isinstance(self.nodes[i], dict):
            raise GraphDecodeError(f"reference to missing node {i}")
        return self.nodes[i]

    def kind(self, i: int) -> str:
        return _kind(str(self.node(i).get("type_key", "")))

    def attr(self, i: int, name: str) -> str:
        attrs = self.node(i).get("attrs", {})
        if name not in attrs:
            raise GraphDecodeError(f"node {i} ({self.kind(i)}) has no field '{name}'")
        return attrs[name]

    def ref(self, i: int, name: str) -> int:
        value = self.attr(i, name)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise GraphDecodeError(f"node {i} field '{name}' is not a reference: {value!r}") from None

    def data(self, i: int) -> list[int]:
        return [int(x) for x in self.node(i).get("data", [])]

    def string(self, i: int, name: str) -> str:
        """A string field: inline in some TVM versions, a String node in others."""
        value = self.attr(i, name)
        if isinstance(value, str) and value.isdigit():
            j = int(value)
            if 0 < j < len(self.nodes) and self.kind(j) == "String":
                return str(self.node(j).get("repr_str", ""))
        return str(value)

    def is_null(self, i: int) -> bool:
        return i == 0 or self.kind(i) == ""


class _Decoder:
    def __init__(self, nodes: _Nodes):
        self.n = nodes
        self.op_index: dict[int, int] = {}  # node id of an op -> its stage index
        self.memo: dict[int, Any] = {}

    # -- ops, in Ansor's topological stage order
    def tensor_op(self, tensor_node: int) -> tuple[int, int]:
        if self.n.kind(tensor_node) != "Tensor":
            raise GraphDecodeError(f"node {tensor_node} is {self.n.kind(tensor_node)}, expected Tensor")
        return self.n.ref(tensor_node, "op"), int(self.n.attr(tensor_node, "value_index"))

    def raw_inputs(self, op_node: int) -> list[int]:
        """Input op nodes of a ComputeOp node, read straight from the JSON, in InputTensors order."""
        kind = self.n.kind(op_node)
        if kind == "PlaceholderOp":
            return []
        if kind != "ComputeOp":
            raise GraphDecodeError(f"unsupported operation type '{kind}' at node {op_node}")
        found: list[tuple[int, int]] = []
        stack = [(b, False) for b in reversed(self.n.data(self.n.ref(op_node, "body")))]
        visited_exprs: set[int] = set()
        while stack:
            i, expanded = stack.pop()
            k = self.n.kind(i)
            if expanded:
                if k == "ProducerLoad":
                    t = self.tensor_op(self.n.ref(i, "producer"))
                    if t not in found:
                        found.append(t)
                continue
            if i in visited_exprs:
                continue
            visited_exprs.add(i)
            stack.append((i, True))
            for c in reversed(self._expr_child_nodes(i, k)):
                stack.append((c, False))
        return [op for op, _ in found]

    def _expr_child_nodes(self, i: int, k: str) -> list[int]:
        n = self.n
        if k in _BINOPS:
            return [n.ref(i, "a"), n.ref(i, "b")]
        if k == "Not":
            return [n.ref(i, "a")]
        if k == "Select":
            return [n.ref(i, "condition"), n.ref(i, "true_value"), n.ref(i, "false_value")]
        if k == "Cast":
            return [n.ref(i, "value")]
        if k == "Call":
            return n.data(n.ref(i, "args"))
        if k == "ProducerLoad":
            return n.data(n.ref(i, "indices"))
        if k == "Reduce":
            init = n.ref(i, "init") if "init" in n.node(i).get("attrs", {}) else 0
            cond = n.ref(i, "condition")
            return n.data(n.ref(i, "source")) + (n.data(init) if init else []) + ([] if n.is_null(cond) else [cond])
        return []

    def topo_order(self, output_ops: list[int]) -> list[int]:
        """Ansor's TopoSortOps: DFS priorities from the outputs, then Kahn's algorithm
        always releasing the ready op with the highest priority."""
        priority: dict[int, int] = {}
        degree: dict[int, int] = {}
        edges: dict[int, list[int]] = {}
        stack = list(output_ops)
        while stack:
            op = stack.pop()
            if op in priority:
                continue
            priority[op] = len(priority)
            inputs = self.raw_inputs(op)
            degree[op] = len(inputs)
            for src in inputs:
                edges.setdefault(src, []).append(op)
                stack.append(src)
        ready = [(-priority[op], op) for op, d in degree.items() if d == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            _, op = heapq.heappop(ready)
            order.append(op)
            for dst in edges.get(op, []):
                degree[dst] -= 1
                if degree[dst] == 0:
                    heapq.heappush(ready, (-priority[dst], dst))
        if len(order) != len(degree):
            raise GraphDecodeError("compute graph has a cycle")
        return order

    # -- values
    def int_value(self, i: int) -> int:
        """A constant integer; TE leaves extents such as ``7 - 0`` unfolded, so fold them."""
        k = self.n.kind(i)
        if k == "IntImm":
            return int(self.n.attr(i, "value"))
        if k in _INT_FOLD:
            return int(_INT_FOLD[k](self.int_value(self.n.ref(i, "a")), self.int_value(self.n.ref(i, "b"))))
        if k == "Select":
            chosen = "true_value" if self.int_value(self.n.ref(i, "condition")) else "false_value"
            return self.int_value(self.n.ref(i, chosen))
        if k == "Cast":
            return self.int_value(self.n.ref(i, "value"))
        if k == "Not":
            return int(not self.int_value(self.n.ref(i, "a")))
        raise GraphDecodeError(f"node {i} is {k}, expected a constant integer (symbolic shapes are not supported)")

    def dtype(self, i: int) -> str:
        return str(self.n.attr(i, "dtype"))

    def var(self, i: int) -> Var:
        if i in self.memo:
            return self.memo[i]
        k = self.n.kind(i)
        if k not in ("Var", "SizeVar"):
            raise GraphDecodeError(f"node {i} is {k}, expected Var")
        v = Var(self.n.string(i, "name"), self.dtype(i), i)
        self.memo[i] = v
        return v

    def iter_axis(self, i: int) -> IterAxis:
        n = self.n
        dom = n.ref(i, "dom")
        iter_type = int(n.attr(i, "iter_type"))
        return IterAxis(self.var(n.ref(i, "var")), self.bound(n.ref(dom, "min")),
                        self.bound(n.ref(dom, "extent")), "reduce" if iter_type == 2 else "spatial")

    def bound(self, i: int) -> Union[int, Expr]:
        """A loop bound: a constant, or (adaptive pooling) an expression of outer axes."""
        try:
            return self.int_value(i)
        except GraphDecodeError:
            return self.expr(i)

    def expr(self, i: int) -> Expr:
        if i in self.memo:
            return self.memo[i]
        n = self.n
        k = n.kind(i)
        if k in _BINOPS:
            e: Expr = BinOp(_BINOPS[k], self.expr(n.ref(i, "a")), self.expr(n.ref(i, "b")), self.dtype(i))
        elif k == "IntImm":
            e = Const(int(n.attr(i, "value")), self.dtype(i))
        elif k == "FloatImm":
            e = Const(float(n.attr(i, "value")), self.dtype(i))
        elif k in ("Var", "SizeVar"):
            e = self.var(i)
        elif k == "Not":
            e = Not(self.expr(n.ref(i, "a")), self.dtype(i))
        elif k == "Select":
            e = Select(self.expr(n.ref(i, "condition")), self.expr(n.ref(i, "true_value")),
                       self.expr(n.ref(i, "false_value")), self.dtype(i))
        elif k == "Cast":
            e = Cast(self.expr(n.ref(i, "value")), self.dtype(i))
        elif k == "Call":
            op_node = n.ref(i, "op")
            op_name = str(n.node(op_node).get("repr_str") or n.node(op_node).get("global_key") or "")
            if not op_name:
                raise GraphDecodeError(f"call at node {i} names no operator")
            e = Call(op_name, tuple(self.expr(a) for a in n.data(n.ref(i, "args"))), self.dtype(i))
        elif k == "ProducerLoad":
            op_node, value_index = self.tensor_op(n.ref(i, "producer"))
            e = Load(self.op_index[op_node], value_index,
                     tuple(self.expr(a) for a in n.data(n.ref(i, "indices"))), self.dtype(i))
        elif k == "Reduce":
            e = self.reduce(i)
        else:
            raise GraphDecodeError(f"unsupported expression type '{n.node(i).get('type_key')}' at node {i}")
        self.memo[i] = e
        return e

    def reduce(self, i: int) -> Reduce:
        n = self.n
        c = n.ref(i, "combiner")
        combiner = CommReducer(
            tuple(self.var(v) for v in n.data(n.ref(c, "lhs"))),
            tuple(self.var(v) for v in n.data(n.ref(c, "rhs"))),
            tuple(self.expr(r) for r in n.data(n.ref(c, "result"))),
            tuple(self.expr(r) for r in n.data(n.ref(c, "identity_element"))),
        )
        cond = n.ref(i, "condition")
        init = n.ref(i, "init") if "init" in n.node(i).get("attrs", {}) else 0
        return Reduce(
            combiner,
            tuple(self.expr(s) for s in n.data(n.ref(i, "source"))),
            tuple(self.iter_axis(a) for a in n.data(n.ref(i, "axis"))),
            Const(1, "bool") if n.is_null(cond) else self.expr(cond),
            int(n.attr(i, "value_index")),
            tuple(self.expr(s) for s in n.data(init)) if init else (),
            self.dtype(i),
        )

    def attr_value(self, i: int) -> Any:
        n = self.n
        if n.is_null(i):
            return None
        k = n.kind(i)
        if k == "String":
            return str(n.node(i).get("repr_str", ""))
        if k == "IntImm":
            return int(n.attr(i, "value"))
        if k == "FloatImm":
            return float(n.attr(i, "value"))
        if k == "Array":
            return tuple(self.attr_value(x) for x in n.data(i))
        if k == "Map":
            keys = n.node(i).get("keys")
            vals = n.data(i)
            if keys is not None:
                return {str(key): self.attr_value(v) for key, v in zip(keys, vals)}
            return {self.attr_value(a): self.attr_value(b) for a, b in zip(vals[::2], vals[1::2])}
        if k == "Tensor":
            op_node, value_index = self.tensor_op(i)
            return TensorRef(self.op_index[op_node], value_index) if op_node in self.op_index else None
        return f"<{k}>"

    def operation(self, i: int) -> Operation:
        n = self.n
        k = n.kind(i)
        if k == "PlaceholderOp":
            shape = tuple(self.int_value(s) for s in n.data(n.ref(i, "shape")))
            return PlaceholderOp(n.string(i, "name"), shape, str(n.attr(i, "dtype")))
        attrs_node = n.ref(i, "attrs")
        attrs = self.attr_value(attrs_node) or {}
        return ComputeOp(
            name=n.string(i, "name"),
            tag=n.string(i, "tag"),
            axes=tuple(self.iter_axis(a) for a in n.data(n.ref(i, "axis"))),
            reduce_axes=tuple(self.iter_axis(a) for a in n.data(n.ref(i, "reduce_axis"))),
            body=tuple(self.expr(b) for b in n.data(n.ref(i, "body"))),
            attrs=attrs if isinstance(attrs, dict) else {},
        )


def decode_graph(graph: Union[str, dict]) -> ComputeGraph:
    """Decode a SaveJSON string (or its parsed dict) of an array of TE tensors."""
    if isinstance(graph, str):
        try:
            graph = json.loads(graph)
        except json.JSONDecodeError as exc:
            raise GraphDecodeError(f"graph is not JSON: {exc}") from None
    if not isinstance(graph, dict):
        raise GraphDecodeError("graph JSON is not an object")
    nodes = _Nodes(graph)
    if nodes.kind(nodes.root) != "Array":
        raise GraphDecodeError(f"graph root is {nodes.kind(nodes.root)}, expected an Array of tensors")
    dec = _Decoder(nodes)
    tensor_nodes = [dec.tensor_op(t) for t in nodes.data(nodes.root)]
    try:
        order = dec.topo_order([op for op, _ in tensor_nodes])
    except RecursionError:
        raise GraphDecodeError("graph nests too deeply") from None
    dec.op_index = {node: idx for idx, node in enumerate(order)}
    try:
        ops = tuple(dec.operation(node) for node in order)
    except RecursionError:
        raise GraphDecodeError("expression nests too deeply") from None
    tensors = tuple(TensorRef(dec.op_index[op], vi) for op, vi in tensor_nodes)
    return ComputeGraph(ops, tensors)
