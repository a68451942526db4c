"""Draft inputs of many programs at the price of reading their loop extents.

An evolutionary search's candidates come from a few design spaces; two candidates with the same
loops (names, kinds, thread tags), stores and statement lists, met in the same order, differ only
in loop extents, and their PSA symbols are the same products and sums of extents (symbols.py). So
the full TIR walk (tir_walk.walk) runs once per such loop structure, a template; every other program
costs one pre-order pass over its loops (~3x cheaper than the walk), and the symbols and draft
scores of a whole population come from one numpy pass, whatever templates it mixes.

A loop of extent 1 can drop out of the indices (a stage computed at it is bound without it), so
one walk cannot tell which buffers that loop indexes: a template serves the programs in which such
loops have extent 1 too (there they multiply every product by 1), and each program walked because
it has one of them longer teaches the template how that loop indexes the buffers. The key cannot
see a fused loop whose parts included one of extent 1. tests/test_draft_stage.py checks the
symbols against the walk's on sampled candidates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
from tvm import tirx

from .devices import DeviceConstants, device_for
from .draft_score import row_scores
from .symbols import SymbolTerms, evaluate_terms, stack_terms, symbol_terms, with_index_columns
from .tir_walk import loops_and_stores, walk

_THREAD_BINDING = tirx.ForKind.THREAD_BINDING


@dataclass(frozen=True)
class DraftFeatures:
    symbols: np.ndarray  # [n, 11] float32, SYMBOL_COLUMNS
    draft_score: float


@dataclass(frozen=True)
class LoopStructure:
    """A program's loops, stores and statement lists in pre-order (the template key), and its loop
    extents in the same order."""

    key: tuple
    extents: tuple[int, ...]
    unit_loops: int  # bit i set: loop i has extent 1


def loop_structure(func: tirx.PrimFunc) -> LoopStructure:
    key: list = []
    extents: list[int] = []
    units = 0

    def on_loop(loop: tirx.For) -> None:
        nonlocal units
        kind = loop.kind
        key.append((loop.loop_var.name, int(kind), loop.thread_binding.thread_tag if kind == _THREAD_BINDING else ""))
        extent = loop.extent
        extent = int(extent.value) if isinstance(extent, tirx.IntImm) else 1
        if extent == 1:
            units |= 1 << len(extents)
        extents.append(extent)

    # A statement list's length fixes where the loops after it sit: in the list or below the loop
    # before it (a cache stage computed at one loop or at its parent).
    loops_and_stores(func.body, on_loop, lambda store: key.append(store.buffer.name), lambda seq: key.append(len(seq)))
    return LoopStructure(tuple(key), tuple(extents), units)


def make_template(func: tirx.PrimFunc) -> SymbolTerms:
    keys: list[int] = []
    loops_and_stores(func.body, lambda loop: keys.append(hash(loop.loop_var)), lambda _: None, lambda _: None)
    return symbol_terms(walk(func).rows, {key: i for i, key in enumerate(keys)})


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

    def __init__(self, target_kind: str, device: str | DeviceConstants | None = None):
        self.device = device_for(target_kind, device)
        # structure key -> (loops whose indexing is unknown: extent 1 in every program walked; the
        # terms, None where the walk failed)
        self.templates: dict[tuple, tuple[int, Optional[SymbolTerms]]] = {}
        self.times = TemplateTimes()

    def _template(self, structure: LoopStructure, func: tirx.PrimFunc) -> Optional[SymbolTerms]:
        """The terms of func, from its structure's template where that knows how every loop of
        func longer than 1 indexes the buffers; else from walking func, which then teaches the
        template how the loops that were of extent 1 in it index them."""
        known = self.templates.get(structure.key)
        if known is not None and known[1] is not None and known[0] & ~structure.unit_loops == 0:
            return known[1]
        start = time.perf_counter()
        try:
            terms = make_template(func)
        except Exception:  # noqa: BLE001 - a TVM error on one structure must not end the search
            terms = None
        self.times.structures += known is None
        if known is None or known[1] is None:
            self.templates[structure.key] = (structure.unit_loops, terms)
        elif terms is not None and terms.per_buffer.shape == known[1].per_buffer.shape:
            learnt = known[0] & ~structure.unit_loops
            columns = np.array([(learnt >> i) & 1 for i in range(len(structure.extents))], dtype=bool)
            self.templates[structure.key] = (known[0] & structure.unit_loops,
                                             with_index_columns(known[1], terms, columns))
        self.times.template_s += time.perf_counter() - start
        self.times.templates += 1
        return terms

    def draft(self, funcs: list[tirx.PrimFunc]) -> list[Optional[DraftFeatures]]:
        """The draft model's inputs of each scheduled PrimFunc; None where it cannot be walked."""
        start, walks_before = time.perf_counter(), self.times.template_s
        groups: dict[int, tuple[SymbolTerms, list[tuple[int, tuple[int, ...]]]]] = {}
        for i, func in enumerate(funcs):
            try:
                structure = loop_structure(func)
            except Exception:  # noqa: BLE001 - as above
                continue
            terms = self._template(structure, func)
            if terms is not None:
                groups.setdefault(id(terms), (terms, []))[1].append((i, structure.extents))
        self.times.structure_s += time.perf_counter() - start - (self.times.template_s - walks_before)
        self.times.programs += len(funcs)
        out: list[Optional[DraftFeatures]] = [None] * len(funcs)
        if not groups:
            self.times.failures += len(funcs)
            return out
        start = time.perf_counter()
        parts = [(terms, len(members)) for terms, members in groups.values()]
        terms = stack_terms(parts)
        # each row's extents: its program's, padded with 1 for loop columns it does not have
        n_loops = terms.products.shape[-1]
        extents_of = np.ones((sum(n for _, n in parts), n_loops))
        owners, rows_per_program = [], []
        for template, members in groups.values():
            for i, extents in members:
                extents_of[len(owners), :len(extents)] = extents
                owners.append(i)
                rows_per_program.append(len(template.float_ops))
        owner = np.repeat(np.arange(len(owners)), rows_per_program)
        symbols = evaluate_terms(terms, extents_of[owner], self.device.is_gpu)
        scores = row_scores(symbols, owner, len(owners), self.device)
        ends = np.cumsum(rows_per_program)
        values = symbols.values.astype(np.float32)
        for j, i in enumerate(owners):
            out[i] = DraftFeatures(values[ends[j] - rows_per_program[j]:ends[j]], float(scores[j]))
        self.times.symbols_s += time.perf_counter() - start
        self.times.failures += len(funcs) - len(owners)
        return out
