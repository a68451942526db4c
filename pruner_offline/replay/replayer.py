"""Apply Ansor transform steps to a TIR schedule of the rebuilt compute.

The replay keeps a shadow of Ansor's state: a list of stages, each holding one TIR loop per
Ansor iterator, so every step's (stage, iterator) indices resolve to loops.

Two facts make that mapping hold:
- every loop primitive runs with unit loops preserved (TIR split keeps them; ``compute_at``
  is told to), so no Ansor iterator is left without a loop, extent 1 or not;
- Ansor's ``compute_at`` keeps a stage's transformed iterators and only re-infers their
  ranges, while TIR's regenerates one fresh loop per block variable. So every stage keeps
  the loop steps applied to it since its loops were last fresh, and after ``compute_at``
  they are applied again to the new loops: the same splits on the smaller region give
  what Ansor's bound inference gives (outer tiles of extent 1).

A shared-memory stage is attached last, once every thread binding exists: TIR sizes the
region of a ``compute_at`` when it runs, relaxing only the thread loops bound by then, while
TE infers it at lowering over the whole block. Ansor attaches shared stages before it fuses
and binds the kernel's outer loops, so attaching them in step order would size them per thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple, Optional, Sequence

from tvm import s_tir, tirx

from ..tenset import steps as st
from ..tenset.te_graph import ComputeGraph, PlaceholderOp
from .compute import stage_names
from .split_guard import guarded_split
from .unchecked import UncheckedSchedule

_THREAD_TAGS = {
    st.Annotation.VTHREAD: "vthread.x",
    st.Annotation.BLOCK_X: "blockIdx.x", st.Annotation.THREAD_X: "threadIdx.x",
    st.Annotation.BLOCK_Y: "blockIdx.y", st.Annotation.THREAD_Y: "threadIdx.y",
    st.Annotation.BLOCK_Z: "blockIdx.z", st.Annotation.THREAD_Z: "threadIdx.z",
}

_KIND_ANNOTATIONS = (st.Annotation.UNROLL, st.Annotation.VECTORIZE, st.Annotation.PARALLEL)

# the loop annotations a PR step writes
_PRAGMA_KEYS = ("pragma_auto_unroll_max_step", "pragma_unroll_explicit")

_LOOP_STEPS = (st.SplitStep, st.FollowSplitStep, st.FollowFusedSplitStep, st.ReorderStep,
               st.FuseStep, st.AnnotationStep, st.PragmaStep)
# steps that settle no stage (``settle``): what they do to the schedule does not depend on any
# loop's length
_STAGE_STEPS = (st.ComputeInlineStep, st.ComputeRootStep, st.CacheReadStep, st.CacheWriteStep,
                st.StorageAlignStep)


class _LoopStepAt(NamedTuple):
    """A loop step in a prefix key: before any stage settles, all a loop step does is wait in its
    stage's history, so its stage is all the state after it depends on."""

    stage: int


def prefix_key(steps: Sequence[st.Step]) -> tuple:
    """What the replay's state after its leading stage steps depends on: those steps, and the loop
    steps among them as their stages (``_LoopStepAt``), up to the last stage step before the first
    step that settles a stage (compute_at, rfactor). Records of one task with the same key reach
    the same state there (a task's records mostly share their inlining and caching; ~0.3 ms of
    schedule primitives a cuda record); empty where no stage step leads."""
    key: list = []
    last = 0
    for step in steps:
        if isinstance(step, _LOOP_STEPS):
            key.append(_LoopStepAt(step.stage))
        elif isinstance(step, _STAGE_STEPS):
            key.append(step)
            last = len(key)
        else:
            break
    return tuple(key[:last])


class ReplayError(Exception):
    """A step that cannot be replayed; ``category`` is short and stable, for histograms."""

    def __init__(self, category: str, detail: str = ""):
        super().__init__(f"{category}: {detail}" if detail else category)
        self.category = category
        self.detail = detail


@dataclass
class _Stage:
    buffer: str  # name of the TIR buffer the stage writes (placeholders: the parameter)
    block: Optional[s_tir.SBlockRV]  # None for placeholders
    iters: list[s_tir.LoopRV] = field(default_factory=list)
    history: list[int] = field(default_factory=list)  # loop steps since the loops were fresh
    applied: int = 0  # how many of them ``iters`` reflect (the rest wait until the loops are needed)
    inlined: bool = False
    attached: bool = False
    pending_target: Optional[s_tir.LoopRV] = None  # a shared stage's compute_at, done after all steps


def _bound_var(binding: tirx.PrimExpr) -> Optional[tirx.Var]:
    """The loop variable of a fresh binding (``v`` or ``min + v``)."""
    if isinstance(binding, tirx.Var):
        return binding
    if isinstance(binding, tirx.Add):
        for side in (binding.b, binding.a):
            if isinstance(side, tirx.Var):
                return side
    return None


class Replayer:
    """Replays one record's steps on a fresh schedule of the task's PrimFunc. ``start`` is that
    schedule with its stages resolved (``Replayer.start``), shared by a task's records: each replay
    works on a copy, which costs ~1% of building the schedule and resolving its stages again."""

    def __init__(self, start: "Replayer", steps: Sequence[st.Step]):
        """start: ``Replayer.start``, or a replayer after ``apply_prefix`` of ``steps``' prefix key."""
        self.sch = start.sch.copy()  # the start's block and loop handles stay valid in the copy
        self.steps = steps
        self.stages = [replace(s, iters=list(s.iters), history=list(s.history)) for s in start.stages]
        self.pragma_loops: list[s_tir.LoopRV] = []  # every loop a PR step annotated (none in a prefix)

    @classmethod
    def start(cls, func: tirx.PrimFunc, graph: ComputeGraph) -> "Replayer":
        """The schedule of ``func`` before any step, its stages' blocks and loops in Ansor's order."""
        self = cls.__new__(cls)
        self.sch, self.steps, self.stages = UncheckedSchedule(func), (), []
        for op, name in zip(graph.ops, stage_names(graph)):
            if isinstance(op, PlaceholderOp):
                self.stages.append(_Stage(name, None))
            else:
                block = self.sch.get_sblock(name)
                self.stages.append(_Stage(name, block, self._root_loops(block)))
        return self

    # ------------------------------------------------------------ loops of fresh blocks

    def _root_loops(self, block: s_tir.SBlockRV) -> list[s_tir.LoopRV]:
        """Loops of a block whose loops are fresh (one per block variable, innermost last),
        ordered as Ansor orders a fresh stage's iterators: the written tensor's dimensions,
        then the reduction axes. Reorders the TIR loops to match where they differ."""
        get = self.sch.get
        sblock = get(block)
        iter_vars = [(iv.var, iv.iter_type) for iv in sblock.iter_vars]
        n = len(iter_vars)
        loops = self.sch.get_loops(block)[-n:] if n else []
        if len(loops) != n:
            raise ReplayError("loop structure", f"{sblock.name_hint}: {len(loops)} loops for {n} block vars")
        nodes = [get(l) for l in loops]
        realize = nodes[-1].body if loops else None
        if not isinstance(realize, s_tir.SBlockRealize):
            return loops
        by_var = {node.loop_var: l for node, l in zip(nodes, loops)}
        loop_of = {}
        for (var, _), binding in zip(iter_vars, realize.iter_values):
            bound = _bound_var(binding)
            if bound is None or bound not in by_var:
                raise ReplayError("loop structure", f"{sblock.name_hint}: binding {binding}")
            loop_of[var] = by_var[bound]
        written = [_bound_var(r.min) for r in sblock.writes[0].region] if sblock.writes else []
        reduce = tirx.IterVar.CommReduce
        spatial = [v for v, kind in iter_vars if kind != reduce]
        order: list[s_tir.LoopRV] = []
        for var in written + spatial + [v for v, kind in iter_vars if kind == reduce]:
            loop = loop_of.get(var) if var is not None else None
            if loop is not None and not any(loop.same_as(l) for l in order):
                order.append(loop)
        if any(not a.same_as(b) for a, b in zip(order, loops)):
            self.sch.reorder(*order)
        return order

    # ------------------------------------------------------------ dispatch

    def stage(self, index: int) -> _Stage:
        if not 0 <= index < len(self.stages):
            raise ReplayError("bad stage index", str(index))
        return self.stages[index]

    def settle(self, stage: _Stage) -> None:
        """Apply the stage's loop steps that wait (see ``apply``)."""
        while stage.applied < len(stage.history):
            index = stage.history[stage.applied]
            try:
                self.apply_loop_step(stage, self.steps[index])
            except ReplayError:
                raise
            except Exception as exc:
                raise ReplayError(f"{self.steps[index].code} rejected by TIR", _first_line(exc)) from None
            stage.applied += 1

    def settle_all(self) -> None:
        """Every stage's waiting loop steps, but those of shared stages still to be attached
        (``attach_pending`` regenerates their loops) and of inlined ones (they have none)."""
        for stage in self.stages:
            if stage.block is not None and not stage.inlined and stage.pending_target is None:
                self.settle(stage)

    def loop(self, stage: _Stage, index: int) -> s_tir.LoopRV:
        if stage.block is None:
            raise ReplayError("loop step on a placeholder", stage.buffer)
        if not 0 <= index < len(stage.iters):
            raise ReplayError("bad iterator index", f"{stage.buffer}[{index}] of {len(stage.iters)}")
        return stage.iters[index]

    def apply_prefix(self, key: tuple) -> None:
        """The state ``run`` reaches after the steps of ``prefix_key``'s ``key``."""
        for index, step in enumerate(key):
            if isinstance(step, _LoopStepAt):
                self.stage(step.stage).history.append(index)
            else:
                self.apply(index, step)

    def run(self, first: int = 0) -> s_tir.Schedule:
        """first: the number of steps already applied (``apply_prefix``)."""
        for i, step in enumerate(self.steps[first:], first):
            try:
                self.apply(i, step)
            except ReplayError:
                raise
            except Exception as exc:  # TVM raises ScheduleError and plain builtins alike
                raise ReplayError(f"{step.code} rejected by TIR", _first_line(exc)) from None
        try:
            self.settle_all()
            self.attach_pending()
        except ReplayError:
            raise
        except Exception as exc:
            raise ReplayError("CA rejected by TIR", _first_line(exc)) from None
        if any(isinstance(step, st.AnnotationStep) and step.annotation in _THREAD_TAGS for step in self.steps):
            # both read every loop's thread binding, and a program with none (every CPU one) has
            # nothing for them to do: 8% of a CPU record's replay time (tenset-mini llvm)
            self.drop_thread_pragmas()
            try:
                self.infer_storage_scopes()
            except Exception as exc:
                raise ReplayError("storage scope rejected by TIR", _first_line(exc)) from None
        return self.sch.schedule

    def drop_thread_pragmas(self) -> None:
        """TE emits an iterator's pragmas only where it makes a loop, never for one bound to a
        thread: Ansor's unroll pragma on a fused blockIdx iterator has no effect on its program.
        Only the loops PR steps annotated can hold one (reading every loop of every stage was 5%
        of a cuda record's featurization)."""
        for loop in self.pragma_loops:
            try:
                node = self.sch.get(loop)
            except Exception:  # noqa: BLE001 - regenerated by compute_at; the step annotated its successor too
                continue
            if node.thread_binding is not None:
                for key in _PRAGMA_KEYS:
                    if key in node.annotations:
                        self.sch.unannotate(loop, key)

    def infer_storage_scopes(self) -> None:
        """TE gives a stage attached inside a kernel the scope of its innermost thread binding
        (blockIdx: shared, threadIdx/vthread: local) unless a cache step chose one; TIR keeps
        such buffers global, which no GPU kernel can allocate."""
        params = {str(p.name) for p in self.sch.mod["main"].params}
        for stage in self.stages:
            if stage.block is None or stage.inlined or not stage.attached or stage.buffer in params:
                continue
            write = self.sch.get(stage.block).writes[0].source
            if write.scope() != "global":  # a cache step's scope: most attached stages, no loop to read
                continue
            rank = -1
            for loop in self.sch.get_loops(stage.block):
                binding = self.sch.get(loop).thread_binding
                tag = binding.thread_tag if binding is not None else ""
                if tag.startswith("blockIdx"):
                    rank = max(rank, 0)
                elif tag.startswith(("threadIdx", "vthread")):
                    rank = 1
            if rank >= 0:
                self.sch.set_scope(stage.block, 0, "shared" if rank == 0 else "local")

    def apply(self, index: int, step: st.Step) -> None:
        if isinstance(step, _LOOP_STEPS):
            # applied when the stage's loops are next needed: a stage attached later (most of a
            # GPU schedule's) gets fresh loops from compute_at, and splitting the old ones
            # first would be wasted work (a third of a CUDA record's replay time)
            self.stage(step.stage).history.append(index)
        elif isinstance(step, st.ComputeAtStep):
            self.compute_at(self.stage(step.stage), self.stage(step.target_stage), step.target_iter)
        elif isinstance(step, st.ComputeInlineStep):
            stage = self.stage(step.stage)
            self.sch.compute_inline(self.block_of(stage))
            stage.inlined = True
        elif isinstance(step, st.ComputeRootStep):
            if self.stage(step.stage).attached:
                raise ReplayError("compute_root of an attached stage")
        elif isinstance(step, st.CacheReadStep):
            self.cache_read(step)
        elif isinstance(step, st.CacheWriteStep):
            self.cache_write(step)
        elif isinstance(step, st.RfactorStep):
            self.rfactor(step)
        elif isinstance(step, st.StorageAlignStep):
            stage = self.stage(step.stage)
            self.sch.storage_align(self.block_of(stage), 0, step.iter, step.factor, step.offset)
        else:
            raise ReplayError(f"unsupported step {step.code}")

    def block_of(self, stage: _Stage) -> s_tir.SBlockRV:
        if stage.block is None:
            raise ReplayError("step on a placeholder", stage.buffer)
        if stage.inlined:
            raise ReplayError("step on an inlined stage", stage.buffer)
        return stage.block

    # ------------------------------------------------------------ loop steps

    def split_lengths(self, step: st.Step) -> tuple[list[Optional[int]], bool]:
        """(lengths, inner_to_outer) of a split, following earlier splits as Ansor does."""
        if isinstance(step, st.SplitStep):
            return list(step.lengths), step.inner_to_outer
        if isinstance(step, st.FollowSplitStep):
            src = self.src_split(step.src_step)
            lengths: list[Optional[int]] = list(src.lengths[: step.n_split - 1])
            rest = src.lengths[step.n_split - 1:]
            last = None if any(l is None for l in rest) else _prod(rest)
            return lengths + [last], True
        assert isinstance(step, st.FollowFusedSplitStep)
        factor = 1
        for s in step.src_steps:
            length = self.src_split(s).lengths[step.level]
            if length is None:
                raise ReplayError("FFSP follows an unfilled split")
            factor *= length
        return [factor], step.factor_or_nparts

    def src_split(self, index: int) -> st.SplitStep:
        src = self.steps[index] if 0 <= index < len(self.steps) else None
        if not isinstance(src, st.SplitStep):
            raise ReplayError("follow-split source is not a split", str(index))
        return src

    def apply_loop_step(self, stage: _Stage, step: st.Step) -> None:
        sch = self.sch
        if isinstance(step, (st.SplitStep, st.FollowSplitStep, st.FollowFusedSplitStep)):
            loop = self.loop(stage, step.iter)
            lengths, inner_to_outer = self.split_lengths(step)
            if any(l is None for l in lengths):
                raise ReplayError("split with unfilled lengths")
            extent = sch.get(loop).extent
            # the fetch split FFSP makes is bound to threads, which TE never tightens
            tighten = isinstance(extent, tirx.IntImm) and not isinstance(step, st.FollowFusedSplitStep)
            factors = _te_split_factors(int(extent), lengths, inner_to_outer) if tighten else \
                ([None, *lengths] if inner_to_outer else [*lengths, None])
            parts = guarded_split(sch, loop, factors, int(extent) if isinstance(extent, tirx.IntImm) else None)
            stage.iters[step.iter: step.iter + 1] = parts
        elif isinstance(step, st.ReorderStep):
            if sorted(step.order) != list(range(len(stage.iters))):
                raise ReplayError("reorder is not a permutation", f"{step.order} of {len(stage.iters)}")
            order = [stage.iters[j] for j in step.order]
            sch.reorder(*order)
            stage.iters = order
        elif isinstance(step, st.FuseStep):
            ids = list(step.iters)
            if not ids or ids != list(range(ids[0], ids[0] + len(ids))):
                raise ReplayError("fuse of non-consecutive iterators", str(ids))
            loops = [self.loop(stage, j) for j in ids]
            fused = sch.fuse(*loops, preserve_unit_iters=True) if len(loops) > 1 else loops[0]
            stage.iters[ids[0]: ids[-1] + 1] = [fused]
            self.retarget(loops, fused)
        elif isinstance(step, st.AnnotationStep):
            self.annotate(self.loop(stage, step.iter), step.annotation)
        elif isinstance(step, st.PragmaStep):
            loop = self.loop(stage, step.iter)
            depth = step.auto_unroll_max_step
            if depth is None:
                raise ReplayError("unsupported pragma", step.pragma.split("$")[0])
            # the annotations MetaSchedule's RewriteUnroll writes; lowering's UnrollLoop reads them
            for key, value in zip(_PRAGMA_KEYS, (depth, 1)):
                sch.annotate(loop, key, value)
            self.pragma_loops.append(loop)

    def annotate(self, loop: s_tir.LoopRV, ann: st.Annotation) -> None:
        if ann == st.Annotation.NONE:
            return
        if ann in _KIND_ANNOTATIONS and _is_one(self.sch.get(loop).extent):
            # TE's lowering drops a trivial loop whatever its kind (thread bindings stay as
            # attributes); a TIR loop kept for its kind would count as a vectorized/unrolled/
            # parallel loop in the features. Extents change only when the stage's loops are
            # regenerated, and then this step runs again.
            return
        if ann == st.Annotation.UNROLL:
            self.sch.unroll(loop)
        elif ann == st.Annotation.VECTORIZE:
            self.sch.vectorize(loop)
        elif ann == st.Annotation.PARALLEL:
            self.sch.parallel(loop)
        elif ann in _THREAD_TAGS:
            self.sch.bind(loop, _THREAD_TAGS[ann])
        else:
            raise ReplayError(f"unsupported annotation {ann.name}")

    # ------------------------------------------------------------ stage steps

    def compute_at(self, stage: _Stage, target: _Stage, target_iter: int) -> None:
        block = self.block_of(stage)
        self.settle(target)
        loop = self.loop(target, target_iter)
        stage.attached = True
        if self.sch.get(block).writes[0].source.scope() == "shared":
            stage.pending_target = loop
            return
        self.sch.compute_at(block, loop, preserve_unit_loops=True)
        self.refresh(stage)

    def attach_pending(self) -> None:
        # consumers first: a stage's region is what its (already placed) consumers read. Each goes
        # first in the loop body, so stages attached to one loop end up in stage order, as TE
        # emits them (the order decides which accesses precede a statement in its loop)
        for stage in reversed(self.stages):
            if stage.pending_target is None or stage.inlined:
                continue
            self.sch.compute_at(self.block_of(stage), stage.pending_target, preserve_unit_loops=True, index=-2)
            stage.pending_target = None
            self.refresh(stage)

    def retarget(self, old: Sequence[s_tir.LoopRV], new: s_tir.LoopRV) -> None:
        """Ansor keeps a stage attached to an iterator that is fused: to the fused one."""
        for stage in self.stages:
            if stage.pending_target is not None and any(stage.pending_target.same_as(l) for l in old):
                stage.pending_target = new

    def refresh(self, stage: _Stage) -> None:
        """Fresh loops for a stage whose loops were regenerated; its loop steps applied again."""
        stage.iters = self._root_loops(self.block_of(stage))
        stage.applied = 0
        self.settle(stage)

    def read_index(self, block: s_tir.SBlockRV, buffer: str) -> int:
        for i, region in enumerate(self.sch.get(block).reads):
            if region.source.name == buffer:
                return i
        raise ReplayError("cache_read: reader does not read the stage", buffer)

    def cache_read(self, step: st.CacheReadStep) -> None:
        stage = self.stage(step.stage)
        readers = [self.block_of(self.stage(r)) for r in step.reader_stages]
        if not readers:
            raise ReplayError("cache_read without readers")
        cache = self.sch.cache_read(readers[0], self.read_index(readers[0], stage.buffer), step.scope,
                                    consumer_blocks=readers)
        self.stages.insert(step.stage + 1, self.new_stage(cache))

    def cache_write(self, step: st.CacheWriteStep) -> None:
        # Ansor: the new stage (index `stage`) computes into the cache, the old one copies out
        stage = self.stage(step.stage)
        block = self.block_of(stage)
        if stage.history:
            raise ReplayError("cache_write after loop steps")
        copy = self.sch.cache_write(block, 0, step.scope)
        self.stages[step.stage] = self.new_stage(block)
        self.stages.insert(step.stage + 1, _Stage(stage.buffer, copy, self._root_loops(copy),
                                                  attached=stage.attached))

    def rfactor(self, step: st.RfactorStep) -> None:
        # Ansor: the rfactor stage takes index `stage`, the write-back stage follows it
        stage = self.stage(step.stage)
        self.settle(stage)
        loop = self.loop(stage, step.iter)
        rf = self.sch.rfactor(loop, step.factor_iter)
        self.stages[step.stage] = self.new_stage(rf)
        self.stages.insert(step.stage + 1, _Stage(stage.buffer, stage.block, self._root_loops(stage.block)))

    def new_stage(self, block: s_tir.SBlockRV) -> _Stage:
        sblock = self.sch.get(block)
        return _Stage(sblock.writes[0].source.name, block, self._root_loops(block))


def _te_split_factors(extent: int, lengths: Sequence[int], inner_to_outer: bool) -> list[int]:
    """Loop extents TE's bound inference gives Ansor's split of an ``extent`` loop: each part
    is clamped to what remains (a 14-wide tile split by [4, 2, 7] is 1x1x2x7, not 1x4x2x7)."""
    parts: list[int] = []
    rest = extent
    for length in (reversed(lengths) if inner_to_outer else lengths):
        parts.append(min(length, rest))
        rest = -(-rest // length)
    parts.append(rest)
    return parts[::-1] if inner_to_outer else parts


def _is_one(extent: tirx.PrimExpr) -> bool:
    return isinstance(extent, tirx.IntImm) and extent.value == 1


def _prod(xs: Sequence[Optional[int]]) -> int:
    out = 1
    for x in xs:
        out *= int(x)  # type: ignore[arg-type]
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for marker in ("Error message:", "Check failed:"):
        if marker in text:
            return text.split(marker, 1)[1].strip().splitlines()[0][:200]
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1][:200] if lines else type(exc).__name__
