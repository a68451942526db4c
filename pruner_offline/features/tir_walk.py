"""One pass over a scheduled TIR PrimFunc that records, per buffer store, what the symbols, the op tag
and the dataflow pattern need: the enclosing loops, the buffers touched and which loops index them.

The walk accepts TIR as a schedule leaves it (blocks with iter vars bound by SBlockRealize) as well as
lowered TIR (opaque blocks, loop vars in the indices): block iter vars are resolved to the loop vars
of their bindings, so "loop l indexes buffer b" means the same thing in both forms.

Statements are grouped the way MetaSchedule's PerStoreFeature groups them (one row per written
buffer, in order of its first non-constant store, described by its last one), so row i of the
symbols and row i of the per-store features describe the same statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import tvm
from tvm import tirx
from tvm_ffi import _ffi_api as _ffi
from tvm_ffi.structural import WalkOrder, _callback_type_to_type_index
from tvm.ir.expr import Call, TensorLoad
from tvm.s_tir import SBlock, SBlockRealize

# Loop kinds, as far as the symbols care.
SERIAL, UNROLLED, VECTORIZED, PARALLEL, VTHREAD, BLOCK_IDX, THREAD_IDX = (
    "serial", "unrolled", "vectorized", "parallel", "vthread", "blockIdx", "threadIdx")

_BOUND = int(tirx.ForKind.THREAD_BINDING)
_FOR_KIND = {
    int(tirx.ForKind.SERIAL): SERIAL,
    int(tirx.ForKind.UNROLLED): UNROLLED,
    int(tirx.ForKind.VECTORIZED): VECTORIZED,
    int(tirx.ForKind.PARALLEL): PARALLEL,
}
_FLOAT_OPS = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod)
_OTHER_FLOAT_OPS = (tirx.Max, tirx.Min)
_FMA = tvm.ir.Op.get("tirx.fma")
_IF_THEN_ELSE = tvm.ir.Op.get("prim.if_then_else")  # a guard (padding), not arithmetic


def _type_index(t) -> int:
    return _callback_type_to_type_index(t, api_name="tir_walk")


# tvm_ffi.structural_walk turns its (type, callback) entries into type indices on every call, which
# was half of the walk's time (~15 walks per program); the indices are fixed, so the walk below
# calls the same FFI function with entries made once.
_VAR, _LOAD, _CALL = _type_index(tirx.Var), _type_index(TensorLoad), _type_index(Call)
_ARITH = [_type_index(t) for t in _FLOAT_OPS]
_OTHER = [_type_index(t) for t in _OTHER_FLOAT_OPS]
_TESTS = [_type_index(t) for t in (tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.EQ, tirx.NE, tirx.And,
                                     tirx.Or, tirx.Not)]
_POST = int(WalkOrder.POSTORDER)
_array_size, _array_item = _ffi.ArraySize, _ffi.ArrayGetItem


def items(array) -> list:
    """The elements of an FFI Array: Array.__iter__ makes four Python calls per element around the
    one FFI call it ends in (a fifth of the walk's time)."""
    return [_array_item(array, i) for i in range(_array_size(array))]


def _structural_walk(root, entries: list[tuple[int, object]]) -> None:
    _ffi.StructuralWalk(root, entries, [], _POST)


def skeleton(root) -> tuple[list, list[int], list]:
    """What fixes the shape of the loop nest under root, in pre-order (a loop before its body): per
    loop (its variable's name, kind, thread tag or ""), per store the name of the buffer written,
    per statement list its length; and the loops' extents and variables in the same order. It
    descends only where the walk below does and reads only these fields: Python reaching through
    the statements is ~2x faster than a structural walk, which also visits every expression.
    native_skeleton.cc reads the same in C++ (the draft stage's pass): a change here is one there,
    and tests/test_draft_stage.py compares the two."""
    shape: list = []
    extents: list[int] = []
    loop_vars: list = []
    _visit_skeleton(root, shape.append, extents.append, loop_vars.append)
    return shape, extents, loop_vars


def _visit_skeleton(stmt, add, add_extent, add_var) -> None:
    # a module-level function, not a closure over itself: that would be a reference cycle per
    # program, left to the garbage collector (which the draft stage holds off, gc_pause.py)
    while True:  # down a chain of single bodies without recursing
        kind = type(stmt)
        if kind is tirx.For:
            var, for_kind, extent = stmt.loop_var, stmt.kind, stmt.extent
            add((var.name, for_kind, stmt.thread_binding.thread_tag if for_kind == _BOUND else ""))
            add_extent(extent.value if type(extent) is tirx.IntImm else 1)
            add_var(var)
            stmt = stmt.body
        elif kind is SBlockRealize:
            block = stmt.block
            if block.init is not None:
                _visit_skeleton(block.init, add, add_extent, add_var)
            stmt = block.body
        elif kind is tirx.BufferStore:
            add(stmt.buffer.name)
            return
        elif kind is tirx.SeqStmt:
            seq = items(stmt.seq)
            add(len(seq))
            for s in seq:
                _visit_skeleton(s, add, add_extent, add_var)
            return
        elif kind is tirx.IfThenElse:
            _visit_skeleton(stmt.then_case, add, add_extent, add_var)
            if stmt.else_case is None:
                return
            stmt = stmt.else_case
        elif kind is not tirx.Bind and hasattr(stmt, "body"):  # SBlock, AttrStmt, DeclBuffer...
            stmt = stmt.body
        else:
            return


# Loop, Access and Statement are named tuples: a walk makes ~40 of them per program, and a tuple
# is made at a fraction of a frozen dataclass's cost (native_walk.py rebuilds them per program).
class Loop(NamedTuple):
    key: int  # identity of the loop variable
    extent: int
    kind: str
    thread_tag: str  # "" unless bound to a thread axis


class Access(NamedTuple):
    name: str
    scope: str
    elem_bytes: int
    numel: int  # elements of the buffer as declared where it is accessed
    loop_keys: frozenset[int]  # loops whose variables appear in the indices


class Statement(NamedTuple):
    block: str
    loops: tuple[Loop, ...]  # outermost first
    write: Access
    reads: tuple[Access, ...]  # distinct buffers loaded, the written one included if it is read
    float_ops: int  # add, sub, mul, div, mod, fma in the stored value, per execution (§6's F)
    other_float_ops: int  # float max/min and math calls (exp, sqrt...), which F leaves out
    has_reduce_axis: bool
    # comparisons and logical ops in the conditions of if_then_else in the stored value (padding's
    # bounds tests), per execution
    guard_ops: int = 0

    @property
    def reads_itself(self) -> bool:
        return any(r.name == self.write.name for r in self.reads)

    @property
    def is_copy(self) -> bool:
        """Moves data between buffers without float arithmetic (cache stages, padding, layout)."""
        return self.float_ops == 0 and bool(self.reads) and not self.reads_itself


@dataclass(frozen=True)
class WalkResult:
    rows: tuple[Statement, ...]  # aligned with PerStoreFeature rows
    inits: tuple[Statement, ...]  # stores of a constant (reduction inits), skipped by PerStoreFeature


def _extent(expr) -> int:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else 1


def loop_kind(kind: int, thread_tag: str) -> str:
    """The symbols' name of a loop of ForKind ``kind`` (bound to ``thread_tag`` if a thread)."""
    if kind != _BOUND:
        return _FOR_KIND[kind]
    if thread_tag.startswith("blockIdx"):
        return BLOCK_IDX
    if thread_tag.startswith("threadIdx"):
        return THREAD_IDX
    return VTHREAD


def _numel(buffer) -> int:
    n = 1
    for dim in items(buffer.shape):
        n *= _extent(dim)
    return n


_NO_KEYS: frozenset[int] = frozenset()


class _Walker:
    def __init__(self) -> None:
        self.loops: list[Loop] = []
        # var identity -> loop keys it depends on; loop vars map to themselves.
        self.var_loops: dict[int, frozenset[int]] = {}
        self.block_stack: list[tuple[str, bool]] = [("", False)]
        # buffer identity -> statement; insertion order = first non-constant store, as PerStoreFeature
        self.rows: dict[int, Statement] = {}
        self.inits: list[Statement] = []
        self.buffers: dict[int, tuple[str, str, int, int]] = {}  # identity -> name, scope, bytes, numel

    def _loop_keys_of(self, expr) -> frozenset[int]:
        """expr: an expression or an Array of them."""
        if type(expr) is tirx.Var:  # most bindings of a stage computed at a loop
            return self.var_loops.get(hash(expr), _NO_KEYS)
        keys: set[int] = set()

        def on_var(var):
            keys.update(self.var_loops.get(hash(var), ()))

        _structural_walk(expr, [(_VAR, on_var)])
        return frozenset(keys)

    def visit(self, stmt) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in items(stmt.seq):
                self.visit(s)
        elif isinstance(stmt, tirx.For):
            key = hash(stmt.loop_var)
            self.var_loops[key] = frozenset((key,))
            tag = stmt.thread_binding.thread_tag if stmt.thread_binding is not None else ""
            self.loops.append(Loop(key, _extent(stmt.extent), loop_kind(int(stmt.kind), tag), tag))
            self.visit(stmt.body)
            self.loops.pop()
        elif isinstance(stmt, SBlockRealize):
            self._visit_block(stmt)
        elif isinstance(stmt, SBlock):
            self.visit(stmt.body)
        elif isinstance(stmt, tirx.BufferStore):
            self._visit_store(stmt)
        elif isinstance(stmt, tirx.IfThenElse):
            self.visit(stmt.then_case)
            if stmt.else_case is not None:
                self.visit(stmt.else_case)
        elif isinstance(stmt, tirx.Bind):
            self.var_loops[hash(stmt.var)] = self._loop_keys_of(stmt.value)
        elif hasattr(stmt, "body"):  # AttrStmt, DeclBuffer, AllocBuffer and friends
            self.visit(stmt.body)

    def _visit_block(self, realize: SBlockRealize) -> None:
        block = realize.block
        has_reduce = False
        for iv, value in zip(items(block.iter_vars), items(realize.iter_values)):
            self.var_loops[hash(iv.var)] = self._loop_keys_of(value)
            has_reduce |= int(iv.iter_type) == tirx.IterVar.CommReduce
        self.block_stack.append((block.name_hint or self.block_stack[-1][0], has_reduce))
        if block.init is not None:
            self.visit(block.init)
        self.visit(block.body)
        self.block_stack.pop()

    def _visit_store(self, store: tirx.BufferStore) -> None:
        loads: list[tuple[object, frozenset[int]]] = []
        pending: set[int] = set()
        float_ops = other_float_ops = 0
        guards: list = []

        # Post-order visits a load's index variables right before the load itself.
        def on_var(var):
            pending.update(self.var_loops.get(hash(var), ()))

        def on_load(load):
            loads.append((load.source, frozenset(pending)))
            pending.clear()

        def on_arith(node):
            nonlocal float_ops
            float_ops += str(node.ty).startswith("float")

        def on_other(node):
            nonlocal other_float_ops
            other_float_ops += str(node.ty).startswith("float")

        def on_call(call):
            nonlocal float_ops, other_float_ops
            if call.op.same_as(_FMA):
                float_ops += 1
            elif call.op.same_as(_IF_THEN_ELSE):
                guards.append(_array_item(call.args, 0))
            elif str(call.ty).startswith("float"):
                other_float_ops += 1

        _structural_walk(store.value, [(_VAR, on_var), (_LOAD, on_load)] + [(t, on_arith) for t in _ARITH]
                         + [(t, on_other) for t in _OTHER] + [(_CALL, on_call)])
        write = self._access(store.buffer, self._loop_keys_of(store.indices))
        reads: dict[str, Access] = {}
        for buffer, keys in loads:
            prev = reads.get(buffer.name)
            reads[buffer.name] = self._access(buffer, keys | (prev.loop_keys if prev else frozenset()))
        name, has_reduce = self.block_stack[-1]
        guard_ops = 0

        def on_test(node):
            nonlocal guard_ops
            guard_ops += 1

        for cond in guards:
            _structural_walk(cond, [(t, on_test) for t in _TESTS])
        stmt = Statement(name, tuple(self.loops), write, tuple(reads.values()), float_ops,
                         other_float_ops, has_reduce, guard_ops)
        if isinstance(store.value, (tirx.IntImm, tirx.FloatImm)):
            self.inits.append(stmt)
        else:
            self.rows[hash(store.buffer)] = stmt

    def _access(self, buffer, loop_keys: frozenset[int]) -> Access:
        key = hash(buffer)
        if key not in self.buffers:  # buffers recur in a program (read and written, several stores)
            self.buffers[key] = (buffer.name, buffer.scope(), max(1, tvm.DataType(str(buffer.dtype)).bits // 8),
                                 _numel(buffer))
        return Access(*self.buffers[key], loop_keys)


def walk(func: tirx.PrimFunc) -> WalkResult:
    walker = _Walker()
    walker.visit(func.body)
    return WalkResult(tuple(walker.rows.values()), tuple(walker.inits))
