"""expand-pipelines: each pipeline becomes loops of asynchronous window copies.

A `copy.pipeline` (Pallas' `emit_pipeline`) becomes, per operand, a
BufferedRef with one DMA semaphore per slot (an `inout` one set for its
fetches and one for its write-backs), and a grid loop whose body runs
Pallas' schedule (`jax/_src/pallas/mosaic/pipeline.py`), each phase over
the operands in spec order. An input fetches `in - 1` steps ahead (with
`lookahead`, `in - 1` blocks ahead), an output waits each write-back
`out - 1` steps after it starts; `in` and `out` are its buffer counts:

- prologue: trivially windowed inputs are copied in synchronously (and
  trivially windowed outputs marked unwritten); the other inputs start
  the fetches before their first one in the loop, a step's fetch only if
  its block changes there;
- each step: every input starts its fetch ahead if its block changes
  there and it is inside the grid (with one buffer, the current step's
  fetch); every input waits its current block if it changed (always at
  the first step); every output that fetches nothing marks its window
  unwritten where its block changes (a body must write a block before
  reading it); the body runs on the current windows; every output starts
  its write-back if its next block differs or at the last step (with one
  output buffer, a synchronous copy); every output waits the write-back
  started `out - 1` steps back, if one was;
- epilogue: the write-backs still in flight are waited, oldest first;
  trivially windowed outputs are copied out synchronously.

Slots are counters that advance when a block changes, so the slot of a
step is its operand's count of changes modulo the buffer count, and each
slot has its own semaphore (`copyir.pipelines` finds the counts and the
changes as affine functions of the grid indices). An operand already in
VMEM gets no BufferedRef: its window is a view of it at the block, never
copied. A `kernel_grid` pipeline's parallel dimensions become an outer
loop marked parallel, each iteration a whole schedule over the other
dimensions, as the cores of a chip run them; an `emit_pipeline` over
`cores` becomes a loop over the cores marked parallel, each running its
group's schedule on its share of the grid under a `when` (the body is
copied into each group's schedule). With `no_pipelining`, every step
copies each input block in and each output block out synchronously
around the body.

Pipelines nested in another's body are expanded first. The result is
loops, `when`s and asynchronous window copies, which the rest of the
lowering turns into the stream.
"""

from __future__ import annotations

import dataclasses
from collections import ChainMap
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    AffineSetAttr,
    ArrayAttr,
    IndexType,
    ModuleOp,
    UnitAttr,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineConstantExpr,
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from copyir.attributes import i64_array
from copyir.dialects.copy import (
    DYNAMIC,
    PARALLEL,
    SQUEEZED,
    BufferedCopyOp,
    BufferedRefOp,
    BufferedRefType,
    ForOp,
    IndexOp,
    InvalidateOp,
    PipelineOp,
    SemaphoreArrayType,
    SemaphoreOp,
    SemIndexOp,
    ViewOp,
    WhenOp,
    WindowOp,
    kernel_level,
    semantics_attr,
    set_name,
)
from copyir.dialects.copy.indexing import Index
from copyir.index import renumbered, renumbered_set
from copyir.names import FreshNames
from copyir.pipelines import PipelineOperand, Schedule, analyse


class _GridBuilder:
    """Appends ops to a list, turning affine expressions of the grid into
    index values of the loops in scope."""

    def __init__(
        self,
        ops: list[Operation],
        grid: dict[int, SSAValue],
        location,
        known: ChainMap[str, SSAValue] | None = None,
    ):
        self.ops = ops
        self.grid = grid
        self.location = location
        self.known = ChainMap() if known is None else known
        """Index values already made in scope, by expression: a `when`'s
        body sees its parents' (they dominate it), not the reverse."""

    def add(self, op: Operation) -> Operation:
        op.location = self.location
        return self.append(op)

    def append(self, op: Operation) -> Operation:
        self.ops.append(op)
        return op

    def value(self, expr: AffineExpr) -> Index:
        """An expression of grid dimensions as an integer or an index value."""
        if isinstance(expr, AffineConstantExpr):
            return expr.value
        used = sorted(self.grid)
        mapped = renumbered(expr, used)
        if isinstance(mapped, AffineConstantExpr):
            return mapped.value
        if isinstance(mapped, AffineDimExpr):
            return self.grid[used[mapped.position]]
        if str(mapped) in self.known:
            return self.known[str(mapped)]
        op = IndexOp(AffineMap(len(used), 0, (mapped,)), [self.grid[d] for d in used])
        value = self.add(op).results[0]
        self.known[str(mapped)] = value
        return value

    def when(self, *cases: list[AffineConstraintExpr]) -> _GridBuilder:
        """A builder for the body of a `when` that holds where all the
        constraints of one of the cases hold; the current builder itself
        when a case has none (it always holds)."""
        if not cases or any(not case for case in cases):
            return self
        used = sorted(self.grid)
        condition = ArrayAttr(
            [AffineSetAttr(renumbered_set(case, used)) for case in cases]
        )
        when = WhenOp.create(
            operands=[self.grid[d] for d in used],
            properties={"condition": condition},
            regions=[Region(Block())],
        )
        self.add(when)
        return _GridBlockBuilder(
            when.body.block, self.grid, self.location, self.known.new_child()
        )


class _GridBlockBuilder(_GridBuilder):
    """A builder that appends straight into a block."""

    def __init__(self, block: Block, grid, location, known=None):
        super().__init__([], grid, location, known)
        self.block = block

    def append(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op


@dataclass
class _WindowedOperand:
    """A pipeline operand with its window buffers (a BufferedRef) and one
    semaphore per slot (None when its copies are synchronous)."""

    spec: PipelineOperand
    bref: SSAValue | None
    """None for an operand in VMEM, whose windows are views of it."""
    sems: SSAValue | None
    """Its fetches' semaphores, or an output's write-backs'."""
    out_sems: SSAValue | None = None
    """An `inout`'s write-backs' semaphores, one per slot (Pallas'
    `sem_sends`), also for a synchronous write-back (one output buffer)."""

    @property
    def copied(self) -> bool:
        """Its blocks are copied asynchronously by the schedule."""
        return not self.spec.trivial and not self.spec.aliased


def _static(schedule: Schedule, step: int) -> list[AffineExpr]:
    """A grid point of a schedule at a static step: parallel dimensions stay
    dimensions, sequential ones become constants."""
    point = [AffineExpr.dimension(d) for d in range(schedule.parallel)]
    strides = schedule.strides(schedule.sequential)
    for stride, d in zip(strides, schedule.sequential, strict=True):
        point.append(AffineExpr.constant((step // stride) % schedule.grid[d]))
    return point


def _statically_holds(constraints: list[AffineConstraintExpr]) -> bool | None:
    """Whether constant constraints hold; None when they depend on indices."""
    result = True
    for c in constraints:
        value = c.lhs - c.rhs
        if not isinstance(value, AffineConstantExpr):
            return None
        result &= value.value == 0
    return result


class _Expansion:
    def __init__(self, op: PipelineOp, names: FreshNames):
        self.op = op
        self.names = names
        """The kernel's names: the window buffers and semaphores get fresh
        ones (two pipelines over one input, `in x` and `out x`, a scratch
        the user named `x_window`)."""
        self.plan = analyse(op)
        self.schedule = self.plan.schedules[0]
        """The schedule being expanded (with cores, one per group of them)."""
        self.location = op.location

    def run(self) -> None:
        op = self.op
        top: list[Operation] = []
        operands = [self.allocate(spec, top) for spec in self.schedule.operands]
        body: list[Operation] = []
        build = _GridBuilder(body, {}, self.location)
        if self.plan.cores is not None:
            self.cores_loop(build, operands)
        else:
            self.expand_schedule(build, operands, self.schedule, last=True)
        rewriter = Rewriter()
        anchor = kernel_level(op)
        for new in top:
            rewriter.insert_op(new, InsertPoint.before(anchor))
        for new in body:
            rewriter.insert_op(new, InsertPoint.before(op))
        op.detach()
        op.erase()

    def expand_schedule(
        self,
        build: _GridBuilder,
        windowed: list[_WindowedOperand],
        schedule: Schedule,
        last: bool,
    ) -> None:
        """One schedule with the synchronous copies of trivially windowed
        operands around it (Pallas' `_sync_copy_in` and `_sync_copy_out`);
        the body is moved into the `last` schedule and copied into others."""
        self.schedule = schedule
        operands = [
            dataclasses.replace(w, spec=spec)
            for w, spec in zip(windowed, schedule.operands, strict=True)
        ]
        synchronous = [o for o in operands if o.spec.trivial and not o.spec.aliased]
        for operand in synchronous:
            if not operand.spec.fetched:  # unwritten until the body writes it
                build.add(InvalidateOp(self.window(build, operand, 0), stale=True))
        for operand in synchronous:
            if operand.spec.fetched:
                build.add(self.sync_copy(operand, [], 0, copy_in=True))
        self.schedules(build, operands, last)
        for operand in synchronous:
            if operand.spec.written:
                build.add(self.sync_copy(operand, [], 0, copy_in=False))

    def cores_loop(self, build: _GridBuilder, operands: list[_WindowedOperand]):
        """A loop over the cores, marked parallel, each core running the
        schedule of its group on its share of the grid."""
        cores = cast(int, self.plan.cores)
        block = Block(arg_types=[IndexType()])
        set_name(block.args[0], "core")
        loop = ForOp.create(
            properties={
                "lower": i64_array((0,)),
                "upper": i64_array((cores,)),
                "dimension_semantics": semantics_attr((PARALLEL,)),
            },
            regions=[Region(block)],
            location=self.location,
        )
        build.add(loop)
        inside = _GridBlockBuilder(block, {0: block.args[0]}, self.location)
        schedules = self.plan.schedules
        ge, core = AffineConstraintKind.ge, AffineExpr.dimension(0)
        for k, schedule in enumerate(schedules):
            first, end = schedule.origin, schedule.origin + schedule.grid[0]
            group = [
                AffineConstraintExpr(ge, core - first, AffineExpr.constant(0))
            ] * bool(first)
            if end < cores:
                group.append(
                    AffineConstraintExpr(
                        ge, AffineExpr.constant(end - 1) - core, AffineExpr.constant(0)
                    )
                )
            guard = inside.when(group)
            self.expand_schedule(guard, operands, schedule, k == len(schedules) - 1)

    def synchronous(self, spec: PipelineOperand) -> bool:
        """Whether the operand's copies are synchronous, through one slot:
        a whole-array block, or a pipeline without pipelining."""
        return spec.trivial or self.op.no_pipelining is not None

    def allocate(self, spec: PipelineOperand, top: list[Operation]) -> _WindowedOperand:
        if spec.aliased:
            return _WindowedOperand(spec, None, None)
        synchronous = self.synchronous(spec)
        buffers = 1 if synchronous else spec.buffers
        bref_type = spec.bref
        if bref_type.buffers.data != buffers:
            bref_type = BufferedRefType(
                bref_type.get_shape(),
                bref_type.element_type,
                bref_type.block_dims,
                buffers,
                bref_type.space.data,
            )
        bref = BufferedRefOp(bref_type, padded=self.op.kernel_grid is not None)
        bref.location = self.location
        name = getattr(spec.ref, "name_hint", None) or "operand"
        self.names.name(bref.results[0], f"{name}_window")
        top.append(bref)
        if synchronous:
            return _WindowedOperand(spec, bref.results[0], None)

        def semaphores(suffix: str) -> SSAValue:
            sem = SemaphoreOp.create(
                result_types=[SemaphoreArrayType([buffers])], location=self.location
            )
            self.names.name(sem.results[0], f"{name}_{suffix}")
            top.append(sem)
            return sem.results[0]

        both = spec.fetched and spec.written
        sems = semaphores("in_sems" if both else "sems")
        out_sems = semaphores("out_sems") if both else None
        return _WindowedOperand(spec, bref.results[0], sems, out_sems)

    # -- the copies

    def copy(
        self,
        build: _GridBuilder,
        operand: _WindowedOperand,
        point,
        action: str | None,
        offset: int | None = None,
        *,
        copy_in: bool,
    ):
        """A window copy of the operand's block at a grid point (`offset`
        steps from the current one, when it is such a point), in or out:
        an asynchronous start or wait on its slot's semaphore, or
        synchronous."""
        spec, bref = operand.spec, operand.bref
        assert bref is not None  # an operand in VMEM is never copied
        schedule = self.schedule
        slot = build.value(self.slot(spec, point, offset))
        block = [build.value(e) for e in schedule.block(spec, point)]
        sem = None
        if action is not None:
            sems = operand.sems if copy_in or not spec.fetched else operand.out_sems
            assert sems is not None  # asynchronous copies have them
            static = [DYNAMIC if isinstance(slot, SSAValue) else slot]
            dynamic = [slot] if isinstance(slot, SSAValue) else []
            sem = build.add(SemIndexOp(sems, static, dynamic)).results[0]
        build.add(
            BufferedCopyOp(
                spec.ref if copy_in else bref,
                bref if copy_in else spec.ref,
                block,
                slot=slot,
                action=action,
                sem=sem,
            )
        )

    def sync_copy(self, operand: _WindowedOperand, block, slot, copy_in: bool):
        assert operand.bref is not None  # an operand in VMEM is never copied
        ref = operand.spec.ref
        src, dst = (ref, operand.bref) if copy_in else (operand.bref, ref)
        return BufferedCopyOp(src, dst, block or None, slot=slot)

    def slot(
        self, spec: PipelineOperand, point, offset: int | None = None
    ) -> AffineExpr:
        if self.synchronous(spec) or spec.buffers == 1:
            return AffineExpr.constant(0)
        if offset is not None:
            return self.schedule.counter_at_step(spec, offset) % spec.buffers
        return self.schedule.counter(spec, point) % spec.buffers

    # -- the schedule

    def schedules(
        self, build: _GridBuilder, operands: list[_WindowedOperand], last: bool
    ) -> None:
        """The parallel loop (if any) around one schedule per point."""
        schedule = self.schedule
        if not schedule.parallel or self.plan.cores is not None:
            self.one_schedule(build, operands, last)
            return
        block = Block(arg_types=[IndexType()] * schedule.parallel)
        for d, arg in enumerate(block.args):
            set_name(arg, self.op.index_name(d))
        loop = ForOp.create(
            properties={
                "lower": i64_array((0,) * schedule.parallel),
                "upper": i64_array(tuple(schedule.grid[: schedule.parallel])),
                "grid": UnitAttr(),
                "dimension_semantics": semantics_attr((PARALLEL,) * schedule.parallel),
            },
            regions=[Region(block)],
            location=self.location,
        )
        build.add(loop)
        grid = {d: block.args[d] for d in range(schedule.parallel)}
        self.one_schedule(_GridBlockBuilder(block, grid, self.location), operands, last)

    def one_schedule(
        self, build: _GridBuilder, operands: list[_WindowedOperand], last: bool
    ) -> None:
        pipelined = self.op.no_pipelining is None
        active = [o for o in operands if o.copied]
        if pipelined:
            self.prologue(build, active)
        step_build, grid_point = self.grid_loop(build)
        self.step(step_build, operands, grid_point, last)
        if pipelined:
            self.epilogue(build, [o for o in active if o.spec.written])

    def prologue(self, build: _GridBuilder, active: list[_WindowedOperand]) -> None:
        """Each input's fetches of the steps before its first in-loop fetch,
        step-major: every input's step 0 block, then step 1's, ... (Pallas'
        `initialize_step`, called per step over all operands)."""
        schedule = self.schedule
        inputs = [o for o in active if o.spec.fetched]
        ahead = max((o.spec.fetched - 1 for o in inputs), default=0)
        for step in range(min(ahead, schedule.steps)):
            for operand in inputs:
                spec = operand.spec
                if step >= spec.fetched - 1:
                    continue
                # With lookahead, the prologue's k-th fetch is the k-th block.
                at = step * schedule.stays(spec) if spec.lookahead else step
                if at >= schedule.steps:
                    continue
                point = _static(schedule, at)
                if _statically_holds(schedule.changes(spec, point)):
                    self.copy(build, operand, point, "start", copy_in=True)

    def epilogue(self, build: _GridBuilder, outputs: list[_WindowedOperand]) -> None:
        """The write-backs still in flight after the last step, the oldest
        first, each lag over all outputs (Pallas' `finalize_step`): an
        output waits each copy `out_buffer_count - 1` steps after it
        starts."""
        schedule = self.schedule
        steps = schedule.steps
        lags = max((o.spec.written - 1 for o in outputs), default=0)
        for lag in range(lags - 1, -1, -1):
            if lag >= steps:
                continue
            point = _static(schedule, steps - 1 - lag)
            later = _static(schedule, steps - lag)
            for operand in outputs:
                if lag >= operand.spec.written - 1:
                    continue
                if lag and not _statically_holds(schedule.changes(operand.spec, later)):
                    continue
                self.copy(build, operand, point, "wait", copy_in=False)

    def grid_loop(self, build: _GridBuilder):
        """The loop over the sequential dimensions; its builder and the
        current grid point."""
        schedule = self.schedule
        sequential = schedule.sequential
        point = [AffineExpr.dimension(d) for d in range(len(schedule.grid))]
        if not sequential:
            return build, point
        block = Block(arg_types=[IndexType()] * len(sequential))
        for arg, d in zip(block.args, sequential, strict=True):
            set_name(arg, self.index_name(d))
        properties: dict[str, Attribute] = {
            "lower": i64_array((0,) * len(sequential)),
            "upper": i64_array(tuple(schedule.grid[d] for d in sequential)),
        }
        if len(sequential) > 1:
            properties["grid"] = UnitAttr()
        loop = ForOp.create(properties=properties, regions=[Region(block)])
        build.add(loop)
        grid = dict(build.grid) | {
            d: arg for d, arg in zip(sequential, block.args, strict=True)
        }
        return _GridBlockBuilder(block, grid, self.location), point

    def index_name(self, d: int) -> str:
        """A schedule dimension's loop index name: the grid index's, whose
        dimension it is (with cores, dimension 0 is the core)."""
        return self.op.index_name(d - 1 if self.plan.cores is not None else d)

    def step(
        self, build: _GridBuilder, operands: list[_WindowedOperand], point, last: bool
    ) -> None:
        schedule = self.schedule
        steps = schedule.steps
        linear = schedule.linear()
        ge = AffineConstraintKind.ge
        pipelined = self.op.no_pipelining is None
        active = [o for o in operands if o.copied]
        inputs = [o for o in active if o.spec.fetched]
        outputs = [o for o in active if o.spec.written]
        if pipelined:
            for operand in inputs:  # phase 1: prefetch
                spec = operand.spec
                ahead = schedule.fetch_distance(spec)
                if ahead == 0:
                    self.copy(
                        build.when(schedule.changes(spec, point)),
                        operand,
                        point,
                        "start",
                        copy_in=True,
                    )
                    continue
                later = schedule.at_step(ahead)
                inside = AffineConstraintExpr(
                    ge,
                    AffineExpr.constant(steps - 1 - ahead) - linear,
                    AffineExpr.constant(0),
                )
                changes = schedule.changes(spec, point if spec.lookahead else later)
                guarded = build.when([*changes, inside])
                self.copy(guarded, operand, later, "start", ahead, copy_in=True)
            for operand in inputs:  # phase 2: wait the current block
                guarded = build.when(schedule.changes(operand.spec, point))
                self.copy(guarded, operand, point, "wait", copy_in=True)
        else:
            for operand in inputs:
                block = [build.value(e) for e in schedule.block(operand.spec, point)]
                build.add(self.sync_copy(operand, block, 0, copy_in=True))
        windows: dict[int, SSAValue] = {}  # by position: `in x` and `out x`
        for position, operand in enumerate(operands):
            if operand.bref is None:
                windows[position] = self.view(build, operand.spec, point)
                continue
            slot = build.value(self.slot(operand.spec, point))
            windows[position] = self.window(build, operand, slot)
        for position, operand in enumerate(operands):
            if not operand.copied or operand.spec.fetched:
                continue  # an output block's first visit: unwritten until written
            guarded = build.when(schedule.changes(operand.spec, point))
            guarded.add(InvalidateOp(windows[position], stale=True))
        self.inline_body(build, windows, last)
        if not pipelined:
            for operand in outputs:
                block = [build.value(e) for e in schedule.block(operand.spec, point)]
                build.add(self.sync_copy(operand, block, 0, copy_in=False))
            return
        eq = AffineConstraintKind.eq
        for operand in outputs:  # phase 4: write back
            spec = operand.spec
            later = schedule.at_step(1)
            changes = schedule.changes(spec, later)
            final = AffineConstraintExpr(eq, linear, AffineExpr.constant(steps - 1))
            guard = self.either(build, changes, final, steps, linear)
            if spec.written == 1 and operand.out_sems is not None:
                # an inout's synchronous write-back: Pallas' `copy_out`
                # starts and waits it on `sem_sends[slot]`, of its
                # `in + out - 1` slots
                self.copy(guard, operand, point, "start", copy_in=False)
                self.copy(guard, operand, point, "wait", copy_in=False)
            elif spec.written == 1:
                slot = guard.value(self.slot(spec, point))
                block = [guard.value(e) for e in schedule.block(spec, point)]
                guard.add(self.sync_copy(operand, block, slot, copy_in=False))
            else:
                self.copy(guard, operand, point, "start", copy_in=False)
        for operand in outputs:  # phase 5: wait the write-back `lag` steps back
            spec = operand.spec
            lag = spec.written - 1
            if lag < 1:
                continue
            changed = schedule.changes(spec, schedule.at_step(1 - lag))
            far = AffineConstraintExpr(ge, linear - lag, AffineExpr.constant(0))
            guarded = build.when([*changed, far])
            earlier = schedule.at_step(-lag)
            self.copy(guarded, operand, earlier, "wait", -lag, copy_in=False)

    def window(
        self, build: _GridBuilder, operand: _WindowedOperand, slot: Index
    ) -> SSAValue:
        """Slot `slot` of the operand's window buffer, as a ref."""
        return build.add(WindowOp(cast(SSAValue, operand.bref), slot)).results[0]

    def view(self, build: _GridBuilder, spec: PipelineOperand, point) -> SSAValue:
        """The window of an operand in VMEM: a view of it at the block
        (Pallas' `bind_existing_ref` with `compute_slice`)."""
        if spec.trivial:
            return spec.ref
        subscripts: list[tuple[int, int, bool]] = []
        dynamic: list[SSAValue] = []
        for dim, index in zip(
            spec.bref.block_dims, self.schedule.block(spec, point), strict=True
        ):
            kind, size = dim.kind.data, dim.size.data
            start = build.value(dim.start(index))
            if isinstance(start, SSAValue):
                dynamic.append(start)
                start = DYNAMIC
            squeezed = kind == SQUEEZED
            subscripts.append((start, 1 if squeezed else size, squeezed))
        return build.add(ViewOp(spec.ref, subscripts, dynamic=dynamic)).results[0]

    @staticmethod
    def either(build: _GridBuilder, changes, last, steps: int, linear) -> _GridBuilder:
        """A builder for `the block changes at the next step, or this is the
        last step`."""
        ge = AffineConstraintKind.ge
        before_last = AffineConstraintExpr(
            ge, AffineExpr.constant(steps - 2) - linear, AffineExpr.constant(0)
        )
        return build.when(changes and [*changes, before_last], [last])

    def inline_body(self, build: _GridBuilder, windows, last: bool) -> None:
        """Move the pipeline's body into the step (copy it, unless this is
        the `last` schedule), its windows and grid indices replaced by the
        step's (the moved ops keep their locations)."""
        mapping: dict[SSAValue, SSAValue] = {}
        for position, arg in enumerate(self.op.windows):
            mapping[arg] = windows[position]
        for d, arg in enumerate(self.op.indices):
            value = build.value(self.schedule.user[d])
            if isinstance(value, int):  # a dimension of extent 1 split over cores
                constant = IndexOp(AffineMap.constant_map(value), [])
                value = build.add(constant).results[0]
            mapping[arg] = value
        if not last:
            for child in self.op.body.block.ops:
                build.append(child.clone(value_mapper=dict(mapping)))
            return
        for arg, value in mapping.items():
            arg.replace_all_uses_with(value)
        for child in list(self.op.body.block.ops):
            child.detach()
            build.append(child)


@dataclass(frozen=True)
class ExpandPipelinesPass(ModulePass):
    """Lower each pipeline to loops of asynchronous window copies."""

    name = "expand-pipelines"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        names: dict[Operation, FreshNames] = {}
        inner_first = op.walk(region_first=True)  # nested ones before their outer
        for pipeline in [o for o in inner_first if isinstance(o, PipelineOp)]:
            kernel = kernel_level(pipeline).parent_op()
            assert kernel is not None  # the kernel_level op is in a kernel
            if kernel not in names:
                names[kernel] = FreshNames.of(kernel)
            _Expansion(pipeline, names[kernel]).run()
