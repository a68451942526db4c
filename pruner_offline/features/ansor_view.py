"""A scheduled PrimFunc as Ansor's feature extractor saw the TE program it lowered from.

Ansor (TenSet's features) extracts its per-store features from TE's lowering *before* storage
flattening: every tensor keeps its whole shape and its global indices, and every thread extent is
a loop of its own, even where a shared-memory fetch re-binds ``threadIdx.x`` inside the kernel's
``threadIdx.x``. MetaSchedule's PerStoreFeature lowers a TIR schedule instead, and two of its steps
change what the features measure:
- ``CompactBufferAllocation`` shrinks an intermediate buffer to the region one iteration of its
  attach point touches and rebases its indices, so touched bytes, strides, reuse and the index
  arithmetic describe a tile where Ansor describes the tensor;
- ``UnifyThreadBinding`` merges the fetch's ``threadIdx.x`` into the kernel's, so its extent is
  counted once where Ansor counts it twice (in outer_prod, the op counts and the access counts).

A third difference is the replay's: TE drops a loop of extent 1 but keeps its
``auto_unroll_max_step`` pragma as an attribute over the loop's body, while a TIR loop carrying the
pragma survives the extractor's removal of unit loops and counts in num_loops.

The view undoes all three before the extractor runs: intermediate buffers become parameters (which
are never compacted), a thread binding nested in a loop bound to the same thread becomes a serial
loop (the extractor sees one loop more, as Ansor does), and the pragma of a unit loop moves to the
outermost non-unit loops inside it, which unroll the same statements. Ansor sizes allocations by
their realize bounds, which is the compacted size, so ``per_store.per_store_features`` takes the
allocation columns from the plain program, and the buffer-access columns from ``regions``, which
bounds touched regions the way Ansor does.
"""

from __future__ import annotations

from tvm import s_tir, tirx


def ansor_view(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """For feature extraction only: the view computes what ``func`` computes, but its
    intermediate buffers are parameters and it is not meant to be built."""
    realize = func.body
    if not isinstance(realize, s_tir.SBlockRealize):
        return func
    root = realize.block
    body = _rewrite(root.body, frozenset(), {})
    block = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body, root.init,
                         [], root.match_buffers, root.annotations)
    return tirx.PrimFunc(list(func.params) + list(root.alloc_buffers),
                         s_tir.SBlockRealize(realize.iter_values, realize.predicate, block), attrs=func.attrs)


# marks a loop the view made serial that TE binds to this thread (regions.py still treats it as a
# thread extent); PerStoreFeature ignores annotations it does not know
THREAD_MARK = "ansor_view.thread"

_PRAGMAS = ("pragma_auto_unroll_max_step", "pragma_unroll_explicit")


def _rewrite(stmt: tirx.Stmt, bound: frozenset[str], pragma: dict) -> tirx.Stmt:
    """``stmt`` with every loop bound to a thread tag already in ``bound`` made serial, and the
    annotations ``pragma`` (from an enclosing unit loop) put on its outermost non-unit loops."""
    if isinstance(stmt, tirx.For):
        tag = stmt.thread_binding.thread_tag if stmt.thread_binding is not None else None
        annotations = dict(stmt.annotations)
        unit = isinstance(stmt.extent, tirx.IntImm) and stmt.extent.value == 1 and stmt.kind == tirx.ForKind.SERIAL
        if unit:
            pragma = {**pragma, **{k: annotations.pop(k) for k in _PRAGMAS if k in annotations}}
        else:
            annotations = {**pragma, **annotations}
            pragma = {}
        body = _rewrite(stmt.body, bound | {tag} if tag else bound, pragma)
        if tag in bound:
            kind, binding = tirx.ForKind.SERIAL, None
            annotations[THREAD_MARK] = tag
        else:
            kind, binding = stmt.kind, stmt.thread_binding
        if body.same_as(stmt.body) and binding is stmt.thread_binding and len(annotations) == len(stmt.annotations):
            return stmt
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, kind, body, binding, annotations)
    if isinstance(stmt, tirx.SeqStmt):
        seq = [_rewrite(s, bound, pragma) for s in stmt.seq]
        return stmt if all(a.same_as(b) for a, b in zip(seq, stmt.seq)) else tirx.SeqStmt(seq)
    if isinstance(stmt, s_tir.SBlockRealize):
        block = stmt.block
        body = _rewrite(block.body, bound, pragma)
        if body.same_as(block.body):
            return stmt
        new = s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, body, block.init,
                           block.alloc_buffers, block.match_buffers, block.annotations)
        return s_tir.SBlockRealize(stmt.iter_values, stmt.predicate, new)
    return stmt
