"""Draft inputs of many programs at the price of reading their loop extents.

An evolutionary search's candidates come from a few design spaces; two candidates with the same
loops (names, kinds, thread tags), stores and statement lists, met in the same order, differ only
in loop extents, and their PSA symbols are the same products and sums of extents (symbols.py). So
the full TIR walk (tir_walk.walk) runs once per such loop structure, a template; every other program
costs one pass down its statements that reads its loops' names, kinds and extents and its stores'
buffer names (tir_walk.skeleton, 6-8x cheaper than the walk; in Python these FFI reads were most of
the draft's cost, so a population's are read in one native call, native_skeleton.py), and the
symbols and draft scores of a whole population come from one numpy pass over rows gathered from
one TermBank, whatever templates it mixes.

A loop of extent 1 can drop out of the indices (a stage computed at it is bound without it), so
one walk cannot tell which buffers such a loop indexes in a statement where it indexes none
(symbols.unindexed_columns; where it indexes one, the block's bindings kept it, and what it
indexes is known). A template serves the programs in which those loops have extent 1 too (there
they multiply every product by 1), and each program walked because it has one of them longer
teaches the template how that loop indexes the buffers (of 300 sampled conv2d candidates, 22 were
walked for it; 106 when every loop of extent 1 was in question). The key cannot see a fused loop
whose parts included one of extent 1. tests/test_draft_stage.py checks the symbols against the
walk's on sampled candidates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple, Optional, Sequence

import numpy as np
from tvm import tirx

from ..devices import DeviceConstants, device_for
from .draft_score import row_scores
from .gc_pause import gc_paused
from .native_skeleton import skeletons
from .symbols import (SymbolTerms, TermBank, evaluate_terms, symbol_terms, unindexed_columns,
                      with_index_columns)
from .native_walk import fast_walk
from .tir_walk import skeleton


@dataclass(frozen=True)
class DraftFeatures:
    symbols: np.ndarray  # [n, 11] float32, SYMBOL_COLUMNS
    draft_score: float
    structure: int  # the same for programs of one loop structure (a hash of its key, this process only)


class LoopStructure(NamedTuple):
    """A program's loops, stores and statement lists in pre-order (the template key), and its loop
    extents and loop variables in the same order. (A named tuple: one is made per program.)"""

    key: tuple | bytes  # skeleton's shape list, or the same written out by native_skeleton
    extents: Sequence[int]
    unit_loops: int  # bit i set: loop i has extent 1
    loop_vars: Sequence


def loop_structure(func: tirx.PrimFunc) -> LoopStructure:
    """The Python pass: the reference, and what is used where the native one cannot be built."""
    # A statement list's length is in the key because it fixes where the loops after it sit: in
    # the list or below the loop before it (a cache stage computed at one loop or at its parent).
    shape, extents, loop_vars = skeleton(func.body)
    units = 0
    for i, extent in enumerate(extents):
        if extent == 1:
            units |= 1 << i
    return LoopStructure(tuple(shape), extents, units, loop_vars)


def loop_structures(funcs: list[tirx.PrimFunc], native: bool = True) -> list[Optional[LoopStructure]]:
    """Each program's loop structure, None where it cannot be read. Keys from the native pass and
    from the Python one never compare equal: a process uses one of them."""
    read = skeletons(funcs) if native else None
    if read is not None:
        return [None if s is None else LoopStructure(*s) for s in read]
    out: list[Optional[LoopStructure]] = []
    for func in funcs:
        try:
            out.append(loop_structure(func))
        except Exception:  # noqa: BLE001 - a TVM error on one program must not end the search
            out.append(None)
    return out


def make_template(func: tirx.PrimFunc, structure: LoopStructure) -> SymbolTerms:
    return symbol_terms(fast_walk(func).rows, {hash(var): i for i, var in enumerate(structure.loop_vars)})


@dataclass
class TemplateTimes:
    structure_s: float = 0.0  # loop_structure of every program
    template_s: float = 0.0  # full walks of new structures
    symbols_s: float = 0.0  # batched symbols and scores
    programs: int = 0
    templates: int = 0  # programs walked
    structures: int = 0  # distinct loop structures among them
    failures: int = 0


class DraftTemplates:
    """The draft model's inputs of programs, through templates kept for the whole tuning run."""

    def __init__(self, target_kind: str, device: str | DeviceConstants | None = None, native: bool = True):
        """native=False: loop structures read by the Python pass (the reference; bench/draft_cost.py)."""
        self.device = device_for(target_kind, device)
        self.native = native
        # structure key -> (loops whose indexing is unknown: in every program walked of extent 1 and
        # indexing nothing in some statement (unindexed_columns); the terms and their rows in the
        # bank, None where the walk failed)
        self.templates: dict[tuple, tuple[int, Optional[SymbolTerms], Optional[tuple[int, int]]]] = {}
        self.bank = TermBank()
        self.times = TemplateTimes()

    def _template(self, structure: LoopStructure, func: tirx.PrimFunc) -> Optional[tuple[int, int]]:
        """The rows in the bank of func's terms: its structure's template where that knows how
        every loop of func longer than 1 indexes the buffers; else from walking func, which then
        teaches the template how the loops that were of extent 1 in it index them."""
        known = self.templates.get(structure.key)
        if known is not None and known[1] is not None and known[0] & ~structure.unit_loops == 0:
            return known[2]
        start = time.perf_counter()
        try:
            terms = make_template(func, structure)
        except Exception:  # noqa: BLE001 - a TVM error on one structure must not end the search
            terms = None
        unknown = 0 if terms is None else structure.unit_loops & unindexed_columns(terms)
        self.times.structures += known is None
        if known is not None and known[1] is not None and terms is not None \
                and terms.per_buffer.shape == known[1].per_buffer.shape:
            learnt = known[0] & ~unknown
            columns = np.array([(learnt >> i) & 1 for i in range(len(structure.extents))], dtype=bool)
            merged = with_index_columns(known[1], terms, columns)
            # the merged template gives func its own symbols (what it still does not know are loops
            # of extent 1 in func): the bank keeps one set of rows per walk
            rows = self.bank.add(merged)
            self.templates[structure.key] = (known[0] & unknown, merged, rows)
        else:
            rows = None if terms is None else self.bank.add(terms)
            if known is None or known[1] is None:
                self.templates[structure.key] = (unknown, terms, rows)
        self.times.template_s += time.perf_counter() - start
        self.times.templates += 1
        return rows

    def draft(self, funcs: list[tirx.PrimFunc]) -> list[Optional[DraftFeatures]]:
        """The draft model's inputs of each scheduled PrimFunc; None where it cannot be walked."""
        with gc_paused():
            return self._draft(funcs)

    def _draft(self, funcs: list[tirx.PrimFunc]) -> list[Optional[DraftFeatures]]:
        start, walks_before = time.perf_counter(), self.times.template_s
        structures = {i: s for i, s in enumerate(loop_structures(funcs, self.native)) if s is not None}
        owners, starts, counts, extents = [], [], [], []
        # Of the programs of one structure, those with the fewest loops of extent 1 first: the one
        # walked for a new template then knows the most loops, and fewer others need a walk.
        for i in sorted(structures, key=lambda i: structures[i].unit_loops.bit_count()):
            structure = structures[i]
            rows = self._template(structure, funcs[i])
            if rows is not None:
                owners.append(i)
                starts.append(rows[0])
                counts.append(rows[1])
                extents.append(structure.extents)
        self.times.structure_s += time.perf_counter() - start - (self.times.template_s - walks_before)
        self.times.programs += len(funcs)
        self.times.failures += len(funcs) - len(owners)
        out: list[Optional[DraftFeatures]] = [None] * len(funcs)
        if not owners:
            return out
        start = time.perf_counter()
        counts_ = np.array(counts)
        terms = self.bank.rows(np.array(starts), counts_)
        # each program's extents, padded with 1 for the loop columns it does not have
        extents_of = np.ones((len(owners), terms.products.shape[-1]))
        for j, e in enumerate(extents):
            extents_of[j, :len(e)] = e
        owner = np.repeat(np.arange(len(owners)), counts_)
        symbols = evaluate_terms(terms, extents_of[owner], self.device.is_gpu)
        scores = row_scores(symbols, owner, len(owners), self.device).tolist()
        values = symbols.values.astype(np.float32)
        end = 0
        for i, n, score in zip(owners, counts, scores):
            out[i] = DraftFeatures(values[end:end + n], score, hash(structures[i].key))
            end += n
        self.times.symbols_s += time.perf_counter() - start
        return out
