"""expand-pipelines: each pipeline becomes loops of asynchronous window copies.

A `copy.pipeline` (Pallas' `emit_pipeline`) becomes, per operand, a
BufferedRef with one DMA semaphore per slot, and a grid loop whose body
runs Pallas' schedule (`jax/_src/pallas/mosaic/pipeline.py`), each phase
over the operands in spec order:

- prologue: trivially windowed inputs are copied in synchronously; the
  other inputs start the fetches of the first `buffers - 1` steps, a step's
  fetch only if its block changes;
- each step: every input starts the fetch for step `s + buffers - 1` if
  its block changes there and it is inside the grid (with one buffer, the
  current step's fetch); every input waits its current block if it changed
  (always at the first step); every output whose block changes here marks
  its window unwritten (a body must write a block before reading it); the
  body runs on the current windows; every output starts its write-back if
  its next block differs or at the last step (with one buffer, a
  synchronous copy); every output waits its previous write-back if its
  block changed and it is not the first step;
- epilogue: the last write-backs are waited; trivially windowed outputs are
  copied out synchronously.

Slots are counters that advance when a block changes, so the slot of a
step is its operand's count of changes modulo the buffer count, and each
slot has its own semaphore (`copyir.pipelines` finds the counts and the
changes as affine functions of the grid indices). Parallel grid dimensions
become an outer loop marked parallel, each iteration a whole schedule over
the other dimensions, as the cores of a chip run them. With
`no_pipelining`, every step copies each input block in and each output
block out synchronously around the body.

The result is loops, `when`s and asynchronous window copies, which the
rest of the lowering turns into the stream.
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineConstantExpr,
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
)
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from copyir.attributes import i64_array
from copyir.dialects.copy import (
    DYNAMIC,
    PARALLEL,
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
    WhenOp,
    WindowOp,
    kernel_level,
    sem_index_result_type,
    semantics_attr,
    set_name,
)
from copyir.names import FreshNames
from copyir.pipelines import PipelineOperand, Schedule, analyse

IntOrIndex = int | SSAValue
"""An integer, or an index value of the loops in scope."""


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

    def value(self, expr: AffineExpr) -> IntOrIndex:
        """An expression of grid dimensions as an integer or an index value."""
        if isinstance(expr, AffineConstantExpr):
            return expr.value
        used = sorted(self.grid)
        mapped = expr.replace_dims_and_symbols(self.local(), [])
        if isinstance(mapped, AffineConstantExpr):
            return mapped.value
        if isinstance(mapped, AffineDimExpr):
            return self.grid[used[mapped.position]]
        if str(mapped) in self.known:
            return self.known[str(mapped)]
        op = IndexOp.create(
            operands=[self.grid[d] for d in used],
            properties={"map": AffineMapAttr(AffineMap(len(used), 0, (mapped,)))},
            result_types=[IndexType()],
        )
        value = self.add(op).results[0]
        self.known[str(mapped)] = value
        return value

    def local(self) -> list[AffineExpr]:
        """Grid dimensions as the dimensions of an op over the loops in
        scope (operand k of its operands)."""
        used = sorted(self.grid)
        local = [AffineExpr.constant(0)] * (max(used, default=-1) + 1)
        for position, dim in enumerate(used):
            local[dim] = AffineExpr.dimension(position)
        return local

    def when(self, *cases: list[AffineConstraintExpr]) -> _GridBuilder:
        """A builder for the body of a `when` that holds where all the
        constraints of one of the cases hold; the current builder itself
        when a case has none (it always holds)."""
        if not cases or any(not case for case in cases):
            return self
        local, used = self.local(), sorted(self.grid)
        condition = ArrayAttr(
            [
                AffineSetAttr(
                    AffineSet(
                        len(used),
                        0,
                        tuple(
                            AffineConstraintExpr(
                                c.kind,
                                c.lhs.replace_dims_and_symbols(local, []),
                                c.rhs.replace_dims_and_symbols(local, []),
                                canonicalize=False,
                            )
                            for c in case
                        ),
                    )
                )
                for case in cases
            ]
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
    bref: SSAValue
    sems: SSAValue | None


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
        self.schedule = analyse(op)
        self.location = op.location

    def run(self) -> None:
        op, schedule = self.op, self.schedule
        top: list[Operation] = []
        operands = [self.allocate(spec, top) for spec in schedule.operands]
        pre = _GridBuilder(top, {}, self.location)
        for operand in operands:
            if operand.spec.trivial and not operand.spec.output:
                pre.add(self.sync_copy(operand, [], 0, copy_in=True))
        after: list[Operation] = []
        post = _GridBuilder(after, {}, self.location)
        for operand in operands:
            if operand.spec.trivial and operand.spec.output:
                post.add(self.sync_copy(operand, [], 0, copy_in=False))
        body = self.schedules(operands)
        rewriter = Rewriter()
        anchor = kernel_level(op)
        for new in top:
            rewriter.insert_op(new, InsertPoint.before(anchor))
        for new in [*body, *after]:
            rewriter.insert_op(new, InsertPoint.before(op))
        op.detach()
        op.erase()

    def allocate(self, spec: PipelineOperand, top: list[Operation]) -> _WindowedOperand:
        buffers = (
            1 if (spec.trivial or self.op.no_pipelining is not None) else spec.buffers
        )
        bref_type = spec.bref
        if bref_type.buffers.data != buffers:
            from copyir.dialects.copy import BufferedRefType

            bref_type = BufferedRefType(
                bref_type.get_shape(),
                bref_type.element_type,
                bref_type.block_dims,
                buffers,
                bref_type.space.data,
            )
        bref = BufferedRefOp.create(result_types=[bref_type], location=self.location)
        name = getattr(spec.ref, "name_hint", None) or "operand"
        self.names.name(bref.results[0], f"{name}_window")
        top.append(bref)
        sems = None
        if not spec.trivial and self.op.no_pipelining is None:
            sem = SemaphoreOp.create(
                result_types=[SemaphoreArrayType([buffers])], location=self.location
            )
            self.names.name(sem.results[0], f"{name}_sems")
            top.append(sem)
            sems = sem.results[0]
        return _WindowedOperand(spec, bref.results[0], sems)

    # -- the copies

    def copy(
        self,
        build: _GridBuilder,
        operand: _WindowedOperand,
        point,
        action: str | None,
        offset: int | None = None,
    ):
        """A window copy of the operand's block at a grid point (`offset`
        steps from the current one, when it is such a point): an
        asynchronous start or wait on its slot's semaphore, or synchronous."""
        spec = operand.spec
        schedule = self.schedule
        slot = build.value(self.slot(spec, point, offset))
        block = [build.value(e) for e in schedule.block(spec, point)]
        sem = None
        if action is not None:
            assert operand.sems is not None  # asynchronous copies have them
            static = [DYNAMIC if isinstance(slot, SSAValue) else slot]
            dynamic = [slot] if isinstance(slot, SSAValue) else []
            index = SemIndexOp.create(
                operands=[operand.sems, *dynamic],
                properties={"indices": i64_array(tuple(static))},
                result_types=[sem_index_result_type(operand.sems.type, 1)],
            )
            sem = build.add(index).results[0]
        build.add(
            BufferedCopyOp(
                operand.bref if spec.output else spec.ref,
                spec.ref if spec.output else operand.bref,
                block,
                slot=slot,
                action=action,
                sem=sem,
            )
        )

    def sync_copy(self, operand: _WindowedOperand, block, slot, copy_in: bool):
        ref = operand.spec.ref
        src, dst = (ref, operand.bref) if copy_in else (operand.bref, ref)
        return BufferedCopyOp(src, dst, block or None, slot=slot)

    def slot(
        self, spec: PipelineOperand, point, offset: int | None = None
    ) -> AffineExpr:
        if spec.trivial or self.op.no_pipelining is not None:
            return AffineExpr.constant(0)
        if offset is not None:
            return self.schedule.counter_at_step(spec, offset) % spec.buffers
        return self.schedule.counter(spec, point) % spec.buffers

    # -- the schedule

    def schedules(self, operands: list[_WindowedOperand]) -> list[Operation]:
        """The parallel loop (if any) around one schedule per point."""
        schedule = self.schedule
        ops: list[Operation] = []
        if not schedule.parallel:
            self.one_schedule(_GridBuilder(ops, {}, self.location), operands)
            return ops
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
        ops.append(loop)
        grid = {d: block.args[d] for d in range(schedule.parallel)}
        self.one_schedule(_GridBlockBuilder(block, grid, self.location), operands)
        return ops

    def one_schedule(
        self, build: _GridBuilder, operands: list[_WindowedOperand]
    ) -> None:
        schedule = self.schedule
        pipelined = self.op.no_pipelining is None
        active = [o for o in operands if not o.spec.trivial]
        if pipelined:
            for operand in active:
                spec = operand.spec
                if spec.output or spec.buffers < 2:
                    continue
                for step in range(min(spec.buffers - 1, schedule.steps)):
                    point = _static(schedule, step)
                    if _statically_holds(schedule.changes(spec, point)):
                        self.copy(build, operand, point, "start")
        loop_body = self.grid_loop(build)
        step_build, grid_point = loop_body
        self.step(step_build, operands, grid_point)
        if pipelined:
            last = _static(schedule, schedule.steps - 1)
            for operand in active:
                if operand.spec.output and operand.spec.buffers == 2:
                    self.copy(build, operand, last, "wait")

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
            set_name(arg, self.op.index_name(d))
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

    def step(
        self, build: _GridBuilder, operands: list[_WindowedOperand], point
    ) -> None:
        schedule = self.schedule
        steps = schedule.steps
        linear = schedule.linear()
        ge = AffineConstraintKind.ge
        pipelined = self.op.no_pipelining is None
        active = [o for o in operands if not o.spec.trivial]
        inputs = [o for o in active if not o.spec.output]
        outputs = [o for o in active if o.spec.output]
        if pipelined:
            for operand in inputs:  # phase 1: prefetch
                spec = operand.spec
                ahead = spec.buffers - 1
                if ahead == 0:
                    self.copy(
                        build.when(schedule.changes(spec, point)),
                        operand,
                        point,
                        "start",
                    )
                    continue
                later = schedule.at_step(ahead)
                inside = AffineConstraintExpr(
                    ge,
                    AffineExpr.constant(steps - 1 - ahead) - linear,
                    AffineExpr.constant(0),
                )
                guarded = build.when([*schedule.changes(spec, later), inside])
                self.copy(guarded, operand, later, "start", ahead)
            for operand in inputs:  # phase 2: wait the current block
                guarded = build.when(schedule.changes(operand.spec, point))
                self.copy(guarded, operand, point, "wait")
        else:
            for operand in inputs:
                block = [build.value(e) for e in schedule.block(operand.spec, point)]
                build.add(self.sync_copy(operand, block, 0, copy_in=True))
        windows: dict[int, SSAValue] = {}  # by position: `in x` and `out x`
        for position, operand in enumerate(operands):
            slot = build.value(self.slot(operand.spec, point))
            static = (
                {} if isinstance(slot, SSAValue) else {"slot": IntegerAttr(slot, i64)}
            )
            window = WindowOp.create(
                operands=[
                    operand.bref,
                    *([slot] if isinstance(slot, SSAValue) else []),
                ],
                properties=static,
                result_types=[
                    WindowOp.slot_type(cast(BufferedRefType, operand.bref.type))
                ],
            )
            windows[position] = build.add(window).results[0]
        for position, operand in enumerate(operands):
            if operand.spec.trivial or not operand.spec.output:
                continue  # a block's first visit: unwritten until written
            guarded = build.when(schedule.changes(operand.spec, point))
            guarded.add(InvalidateOp(windows[position], stale=True))
        self.inline_body(build, windows)
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
            last = AffineConstraintExpr(eq, linear, AffineExpr.constant(steps - 1))
            guard = self.either(build, changes, last, steps, linear)
            if spec.buffers == 1:
                block = [guard.value(e) for e in schedule.block(spec, point)]
                guard.add(self.sync_copy(operand, block, 0, copy_in=False))
            else:
                self.copy(guard, operand, point, "start")
        for operand in outputs:  # phase 5: wait the previous write-back
            spec = operand.spec
            if spec.buffers != 2:
                continue
            earlier = schedule.at_step(-1)
            first = AffineConstraintExpr(ge, linear - 1, AffineExpr.constant(0))
            guarded = build.when([*schedule.changes(spec, point), first])
            self.copy(guarded, operand, earlier, "wait", -1)

    @staticmethod
    def either(build: _GridBuilder, changes, last, steps: int, linear) -> _GridBuilder:
        """A builder for `the block changes at the next step, or this is the
        last step`."""
        ge = AffineConstraintKind.ge
        before_last = AffineConstraintExpr(
            ge, AffineExpr.constant(steps - 2) - linear, AffineExpr.constant(0)
        )
        return build.when(changes and [*changes, before_last], [last])

    def inline_body(self, build: _GridBuilder, windows) -> None:
        """Move the pipeline's body into the step, its windows and grid
        indices replaced by the step's (the moved ops keep their locations)."""
        for position, arg in enumerate(self.op.windows):
            arg.replace_all_uses_with(windows[position])
        for d, arg in enumerate(self.op.indices):
            arg.replace_all_uses_with(build.grid[d])
        for child in list(self.op.body.block.ops):
            child.detach()
            build.append(child)


@dataclass(frozen=True)
class ExpandPipelinesPass(ModulePass):
    """Lower each pipeline to loops of asynchronous window copies."""

    name = "expand-pipelines"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        names: dict[Operation, FreshNames] = {}
        for pipeline in [o for o in op.walk() if isinstance(o, PipelineOp)]:
            kernel = kernel_level(pipeline).parent_op()
            assert kernel is not None  # the kernel_level op is in a kernel
            if kernel not in names:
                names[kernel] = FreshNames.of(kernel)
            _Expansion(pipeline, names[kernel]).run()
