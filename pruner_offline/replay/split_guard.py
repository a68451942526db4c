"""A split whose parts overshoot the loop, with TIR's guard added without TIR's re-simplification.

When the factors of a split multiply to more than the loop's extent (Ansor's fetch splits of a
fused shared-memory copy: 1436 of 19659 splits on tenset-mini's cuda records), TIR's ``split``
appends the guard ``outer * f + inner < extent`` to the predicate of every block realize below the
loop, then re-simplifies the blocks' bindings under that predicate. The re-simplification costs
~2.1 ms a split (2.3-2.4 ms against 0.27 ms with ``disable_predication``), a fifth of a cuda
record's replay. Here the split runs without predication and the same guard is appended by hand,
in the same order as TIR's (``old && guard``; a split of a part later substitutes into it as into
TIR's). The bindings keep their unsimplified form (``(a * 80 + b) * 8 + c`` stays, where TIR
writes ``a * 640 + b * 8 + c``), which PerStoreFeature's own simplification and the TIR walk read
the same way: tests/test_split_guard.py checks every stored feature on the bundled cuda records
against TIR's predicated split (tenset-mini, the public logs, ansor-sampled: identical on all).
The schedule's trace records the split without predication and not the guard: the program
(``sch.mod``) is what carries it, and nothing replays a replayed record's trace.
"""

from __future__ import annotations

from typing import Optional, Sequence

from tvm import s_tir, tirx


def overshoot(extent: int, factors: Sequence[Optional[int]]) -> bool:
    """Whether TIR guards this split: the parts, a ``None`` factor taken as the ceiling TIR infers,
    cover more than ``extent``."""
    known = 1
    for f in factors:
        if f is not None:
            known *= int(f)
    if None in factors:
        return extent % known != 0
    return known != extent


def _realizes_only(stmt) -> bool:
    """The statement is loops and statement lists down to block realizes (the block bodies are
    not entered: TIR's guard goes on the outermost realizes only)."""
    if isinstance(stmt, s_tir.SBlockRealize):
        return True
    if isinstance(stmt, tirx.For):
        return _realizes_only(stmt.body)
    if isinstance(stmt, tirx.SeqStmt):
        return all(_realizes_only(s) for s in stmt.seq)
    return False


def _conjoin(predicate, guard):
    # TIR's ``predicate && guard`` folds a true predicate away
    if isinstance(predicate, tirx.IntImm) and int(predicate.value) == 1:
        return guard
    return tirx.And(predicate, guard)


def _guarded(stmt, guard):
    """``stmt`` with ``guard`` on its outermost block realizes; callers check ``_realizes_only``
    first (before splitting, which cannot be undone), so nothing else reaches here."""
    if isinstance(stmt, s_tir.SBlockRealize):
        return s_tir.SBlockRealize(stmt.iter_values, _conjoin(stmt.predicate, guard), stmt.block)
    if isinstance(stmt, tirx.For):
        return _with_body(stmt, _guarded(stmt.body, guard))
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_guarded(s, guard) for s in stmt.seq])
    raise TypeError(f"{type(stmt).__name__} below a guarded split: _realizes_only let it through")


def _with_body(loop: tirx.For, body) -> tirx.For:
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations,
                    loop.step)


def guarded_split(sch, loop: s_tir.LoopRV, factors: Sequence[Optional[int]],
                  extent: Optional[int]) -> list[s_tir.LoopRV]:
    """``sch.split(loop, factors, preserve_unit_iters=True)``, the same program up to the form of
    the bindings, at the price of a split that needs no guard. ``sch``: the replay's schedule
    (UncheckedSchedule or Schedule); ``extent``: the loop's, None where it is not a constant."""
    if extent is None or not overshoot(extent, factors) or not _realizes_only(sch.get(loop).body):
        return sch.split(loop, factors, preserve_unit_iters=True)
    parts = sch.split(loop, factors, preserve_unit_iters=True, disable_predication=True)
    loops = [sch.get(p) for p in parts]
    # TIR's substitute value: ((v0 * f1 + v1) * f2 + v2) ..., a part's extent being its factor
    value = loops[0].loop_var
    for part in loops[1:]:
        value = value * part.extent + part.loop_var
    inner = loops[-1]
    sch.state.replace(sch.get_sref(parts[-1]), _with_body(inner, _guarded(inner.body, value < extent)))
    return parts
