"""verify: check a copy program and report its first error, located.

One walk in program order: each op's operands must be defined before it
(xDSL's own verify does not check dominance), then the op's IRDL constraints
and its `verify_`, then, for the DMAs, the checks that look through views
(`verify_accesses`, given one `copyir.access.Accesses` for the whole
program, as MLIR's `verifySymbolUses` is given one symbol table, so that
each view is folded once however many DMAs use it). The first error wins
and carries the op's location, so a user sees one precise error at the line
that caused it.

Inside loops, what depends on loop indices (a view's start, a semaphore or
block index, a slot, whether a DMA's ends overlap) is checked at every point
of the op's iteration domain (`copyir.domain`), and the error names the
first point that fails, `..., at i = 199999`, with the message the same
mistake has when it is static.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import (
    AffineConstantExpr,
    AffineExpr,
)
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from copyir import errors, limits
from copyir.access import Accesses
from copyir.dialects.copy import (
    ALLOCATING,
    SQUEEZED,
    AllocOp,
    AsyncCopyOp,
    AsyncDmaOp,
    BufferedCopyOp,
    BufferedRefOp,
    BufferedRefType,
    ComputeOp,
    CopyOp,
    DmaOp,
    ForOp,
    InvalidateOp,
    KernelOp,
    OpaqueOp,
    PipelineOp,
    RefType,
    ScopeOp,
    SemaphoreArrayType,
    SemaphoreOp,
    SemIndexOp,
    SyncCopyOp,
    ViewOp,
    WhenOp,
    WindowOp,
    _check_subscript,
    check_block_indices,
    describe,
    is_padded,
    past_end,
)
from copyir.domain import Domain, Loop
from copyir.errors import CopyIRError, Loc, Note
from copyir.index import (
    Dims,
    Pieces,
    bounds_over,
    evaluate,
    row_major_strides,
    substitute_sets,
)
from copyir.locations import loc_of
from copyir.target import DEFAULT, Target, get_target


def verify(module: ModuleOp, target: Target = DEFAULT) -> None:
    """Raise the program's first error as a located `CopyIRError`.

    Besides each op's own checks: values defined before use, kernel names
    unique, and every buffer no larger than its space in the target.
    """
    kernels = list(module.ops)
    if not kernels:
        raise CopyIRError(errors.NO_KERNELS, loc_of(module.location))
    if any(block.args for block in module.body.blocks):
        raise CopyIRError(errors.MODULE_ARGUMENTS, loc_of(module.location))
    names = set()
    for kernel in kernels:
        if not isinstance(kernel, KernelOp):
            raise CopyIRError(
                errors.NOT_A_KERNEL.format(op=kernel.name), loc_of(kernel.location)
            )
        if kernel.kernel_name in names:
            raise CopyIRError(
                errors.DUPLICATE_KERNEL.format(name=kernel.kernel_name),
                loc_of(kernel.location),
            )
        names.add(kernel.kernel_name)
        _verify_op(kernel, set(), target, Accesses(), Domain(), Budget())


TOP_LEVEL = (AllocOp, SemaphoreOp, BufferedRefOp)
"""Ops that make buffers and semaphores: once per kernel, not per iteration
(an alloc or a semaphore directly in a scope: once per entry)."""


def _misplaced(op: CopyOp) -> bool:
    """Whether an op that makes a buffer or a semaphore is where it may not
    be: only a kernel's body, or for an alloc or a semaphore a scope's,
    holds one."""
    parent = op.parent_op()
    if isinstance(parent, KernelOp):
        return False
    return not (
        isinstance(parent, ALLOCATING) and isinstance(op, AllocOp | SemaphoreOp)
    )


def _verify_op(
    op: CopyOp,
    defined: set[SSAValue],
    target: Target,
    accesses: Accesses,
    domain: Domain,
    budget: Budget | None = None,
) -> None:
    budget = Budget() if budget is None else budget
    for operand in op.operands:
        if operand not in defined:
            raise CopyIRError(
                errors.USED_BEFORE_DEFINED.format(name=describe(operand)),
                loc_of(op.location),
            )
    try:
        if isinstance(op, TOP_LEVEL) and _misplaced(op):
            notes = () if isinstance(op, BufferedRefOp) else (Note(errors.HINT_SCOPE),)
            raise CopyIRError(errors.NOT_AT_TOP_LEVEL.format(op=op.name), notes=notes)
        op.verify_all()
        if _plain(type(op)):  # no accesses, instructions, loops or buffers
            if domain.loops:
                _check_over_domain(op, accesses, domain)
        else:
            _check_kind(op, target, accesses, domain, budget)
    except VerifyException as err:
        raise CopyIRError(str(err), loc_of(op.location)) from None
    except CopyIRError as err:
        raise err.at(loc_of(op.location)) from None
    if isinstance(op, ComputeOp):  # its region of scalar ops is its own check's
        defined.update(op.results)
        return
    if not op.regions:
        defined.update(op.results)
        return
    inner_domain = _inner_domain(op, accesses, domain)
    for region in op.regions:
        for block in region.blocks:
            inner = defined | set(block.args)
            for child in block.ops:
                if not isinstance(child, CopyOp) or isinstance(child, KernelOp):
                    raise CopyIRError(
                        errors.NOT_IN_KERNEL.format(op=child.name),
                        loc_of(child.location),
                    )
                _verify_op(child, inner, target, accesses, inner_domain, budget)
                inner.update(child.results)
    defined.update(op.results)


def _check_kind(
    op: CopyOp, target: Target, accesses: Accesses, domain: Domain, budget: Budget
) -> None:
    """The walk's checks of an op that is not `_plain`, in their order."""
    if isinstance(op, DmaOp | SyncCopyOp | AsyncCopyOp):
        op.verify_accesses(accesses)
    budget.count(op, domain, accesses)  # before any work at every point
    if domain.loops:
        _check_over_domain(op, accesses, domain)
    if isinstance(op, PipelineOp):
        from copyir.pipelines import analyse

        analyse(op)
        _check_index_maps_limit(op)
        _check_input_windows_read_only(op, accesses)
    _check_capacity(op, target)


_KINDS = (
    DmaOp,
    SyncCopyOp,
    AsyncCopyOp,
    AsyncDmaOp,
    InvalidateOp,
    ComputeOp,
    OpaqueOp,
    BufferedCopyOp,
    ForOp,
    PipelineOp,
    KernelOp,
    AllocOp,
    BufferedRefOp,
    ScopeOp,
)
"""The ops whose kind `_check_kind` (the budget, the capacity, the checks
through views) has something to do for."""


@functools.cache
def _plain(cls: type) -> bool:
    """Whether `_check_kind` has nothing to do for ops of the class (views,
    indices, semaphores and conditions: most ops of a large kernel), so
    that they are spared a dozen isinstance checks each."""
    return not issubclass(cls, _KINDS)


# -- the limits of a run ---------------------------------------------------------------


@dataclass
class Budget:
    """What a kernel's run will hold, counted as the walk meets each op,
    against `copyir.limits`: every loop nest's iterations, and the stream
    instructions it runs in all (each once per iteration of the loops
    around it, conditions not counted: the run expands them so; an op that
    reads a min or max once per piece, as `expand-min-max` copies it). What
    this accepts, the stream validator accepts."""

    events: int = 0
    around: tuple[str, Loc | None] | None = None
    """The outermost loop or pipeline being walked, which errors name."""

    def count(self, op: Operation, domain: Domain, accesses: Accesses) -> None:
        if isinstance(op, ForOp | PipelineOp):
            what = _describe_loop(op)
            if not domain.loops:
                self.around = (what, loc_of(op.location))
            total = domain.size * limits.iterations(_trips(op))
            if total > limits.MAX_ITERATIONS:
                raise CopyIRError(
                    errors.TOO_MANY_ITERATIONS.format(
                        what=what, count=total, limit=limits.MAX_ITERATIONS
                    )
                )
        weight = domain.size * domain.copies * accesses.pieces(op)
        self.events += weight * instructions(op)
        if self.events > limits.MAX_EVENTS:
            inside = domain.loops or isinstance(op, ForOp | PipelineOp)
            what, loc = (
                self.around if inside and self.around else ("This statement", None)
            )
            raise CopyIRError(
                errors.TOO_MANY_EVENTS.format(
                    what=what, count=self.events, limit=limits.MAX_EVENTS
                ),
                loc,
            )


def _trips(op: ForOp | PipelineOp) -> list[int]:
    if isinstance(op, ForOp):
        return [hi - lo for lo, hi in op.bounds]
    return list(op.grid_shape)


def _describe_loop(op: ForOp | PipelineOp) -> str:
    """`Loop i`, `Loop i, j`, `The pipeline`."""
    if isinstance(op, PipelineOp):
        return "The pipeline"
    return f"Loop {', '.join(describe(i) for i in op.indices)}"


def instructions(op: Operation) -> int:
    """The stream instructions one execution of the op lowers to, at most
    (a pipeline's own copies over its whole grid; its body's ops count
    themselves)."""
    if isinstance(op, ComputeOp):
        return limits.weight(len(op.inputs))
    if isinstance(op, DmaOp | AsyncDmaOp | InvalidateOp):
        return 1
    if isinstance(op, OpaqueOp):
        return len(op.operands)  # one instruction per ref
    if isinstance(op, SyncCopyOp):
        return 2 * len(op.srcs)
    if isinstance(op, BufferedCopyOp):
        from copyir.passes.expand_windows import instruction_count

        actions = 2 if op.action_value is None else 1
        type = cast(BufferedRefType, op.bref.type)
        padded = is_padded(op.bref)
        return instruction_count(type, op.block_indices, actions, op.copy_in, padded)
    if isinstance(op, PipelineOp):
        return _pipeline_instructions(op)
    if isinstance(op, ScopeOp):
        return scope_instructions(op)
    return 0


def scope_instructions(op: ScopeOp) -> int:
    """A scope's entry and exit: an invalidation and a release per buffer,
    a release per semaphore (its own ops count themselves)."""
    made = op.allocations()
    return sum(2 if isinstance(a, AllocOp) else a.count for a in made)


def _pipeline_instructions(op: PipelineOp) -> int:
    """A pipeline's copies, waits and invalidations, at most: per operand
    and step, an invalidation and two window copies (a start and a wait,
    or a synchronous copy); per schedule (a point of a kernel grid's
    parallel dimensions, or a core's copy of a group's, `core_copies`,
    whose steps count as often), the prologue's fetches and the
    epilogue's waits, or the copies of a trivially windowed operand; none
    for an operand in VMEM, which the pipeline views."""
    from copyir.passes.expand_windows import instruction_count

    from copyir.pipelines import core_copies

    grid = op.grid_shape
    copies, schedules = core_copies(op)
    steps = limits.iterations(grid) * copies
    if op.kernel_grid is not None:
        schedules = limits.iterations(grid[: len(op.parallel_dims)])
    count = 0
    for (ref, _, bref, index_map), spec in zip(
        op.specs(), op.ref_specs.data, strict=True
    ):
        if op.viewed(ref):
            continue  # viewed at each block, never copied
        block = [
            r.value if isinstance(r, AffineConstantExpr) else r
            for r in index_map.data.results
        ]
        padded = op.kernel_grid is not None
        copies = instruction_count(bref, block, 1, True, padded)
        copy = copies * (1 + spec.input * spec.output)
        count += steps * (1 + 2 * copy) + schedules * (bref.buffers.data * copy + 2)
    return count


def _check_index_maps_limit(op: PipelineOp) -> None:
    """Each index map's block offsets bounded like a DMA end's address; the
    schedule evaluates a map up to `buffers` steps ahead and one behind,
    so over a grid widened by as much."""
    for ref, _, bref, index_map in op.specs():
        reach = [g + bref.buffers.data for g in op.grid_shape]
        block = list(index_map.data.results)
        _check_block_limit(bref, block, lambda d, r=reach: (-1, r[d]), describe(ref))


def _check_input_windows_read_only(op: PipelineOp, accesses: Accesses) -> None:
    """A pipeline fetches an input block only when it changes, so a body
    that writes an input window leaves its writes for later steps to read,
    or not, depending on the index map: an error at the write."""
    inputs = {
        window: ref
        for window, (ref, output, _, _) in zip(op.windows, op.specs(), strict=True)
        if not output
    }
    for child in op.body.walk():
        if not isinstance(child, CopyOp):
            continue
        for value in child.written():
            access = accesses(value)
            root = access.root if access is not None else value
            if root in inputs:
                raise CopyIRError(
                    errors.PIPELINE_WRITES_INPUT.format(
                        window=describe(value), name=describe(inputs[root])
                    ),
                    loc_of(child.location),
                )


# -- the iteration domain ------------------------------------------------------------


def _inner_domain(op: Operation, accesses: Accesses, domain: Domain) -> Domain:
    """The domain of a loop's or a condition's body."""
    if isinstance(op, ForOp):
        loops = [
            Loop(accesses.dim(index), lo, hi, describe(index))
            for index, (lo, hi) in zip(op.indices, op.bounds, strict=True)
        ]
        return domain.inside(loops)
    if isinstance(op, PipelineOp):
        from copyir.pipelines import core_copies

        loops = [
            Loop(accesses.dim(index), 0, extent, describe(index))
            for index, extent in zip(op.indices, op.grid_shape, strict=False)
        ]
        return domain.inside(loops, core_copies(op)[0])
    if isinstance(op, WhenOp):
        args = [accesses.index(a) for a in op.args]
        return domain.when(substitute_sets([s.data for s in op.condition.data], args))
    return domain


def _values_at(value: int | AffineExpr | Pieces, dims: Dims) -> np.ndarray:
    return np.asarray(value) if isinstance(value, int) else evaluate(value, dims)


def _fail_at(domain: Domain, point: dict[int, int], raise_static) -> None:
    """Raise the static check's own error for the failing point's values,
    naming the point."""
    try:
        raise_static(point)
    except CopyIRError as err:
        raise CopyIRError(
            f"{err.message}, at {domain.name(point)}", err.loc, err.notes
        ) from None
    raise AssertionError("the static check passed where the domain check failed")


def _value_at(value: int | AffineExpr | Pieces, point: dict[int, int]) -> int:
    if isinstance(value, int):
        return value
    dims = {dim: np.array([index]) for dim, index in point.items()}
    return int(evaluate(value, dims)[0])


def _check_over_domain(op: Operation, accesses: Accesses, domain: Domain) -> None:
    if isinstance(
        op, DmaOp | AsyncCopyOp | SyncCopyOp | ComputeOp | OpaqueOp | InvalidateOp
    ):
        _check_address_limit(op.operands, accesses, domain)
    if isinstance(op, WindowOp) and isinstance(op.slot_value, SSAValue):
        slot = accesses.index(op.slot_value)
        type = cast(BufferedRefType, op.bref.type)
        _check_slot_limit(type, slot, domain, describe(op.bref))
    if isinstance(op, ViewOp | SemIndexOp):
        _check_subscripts(op, accesses, domain)
    elif isinstance(op, BufferedCopyOp):
        _check_window(op, accesses, domain)
    elif isinstance(op, DmaOp | AsyncCopyOp):
        if not (isinstance(op, DmaOp) and not op.is_start):
            _check_overlap(op.src, op.dst, accesses, domain)
    elif isinstance(op, SyncCopyOp):
        for src, dst in zip(op.srcs, op.dsts, strict=True):
            _check_overlap(src, dst, accesses, domain)


def _check_address_limit(values, accesses: Accesses, domain: Domain) -> None:
    """The lowering makes each DMA end's byte address and each semaphore id
    an affine map of the loop indices, which the run bounds over the loops'
    ranges below `limits.LIMIT` (interval arithmetic: a part such as `i + 2**62`
    in `(i + 2**62) % 8` counts): an end whose bounds reach it is refused
    here, at its op, so that what verify accepts the run accepts (below
    `limits.MAX_OFFSET`, leaving room for the buffer's own address)."""
    for value in values:
        access = accesses(value)
        if access is None or isinstance(access.offset, int):
            continue
        type = access.root.type
        item = type.dtype.itemsize if isinstance(type, RefType) else 1
        if not _bounded(access.offset * item, domain):
            raise _over_limit(describe(value))


@functools.lru_cache(maxsize=4096)
def _bounded(expr: AffineExpr | Pieces, domain: Domain) -> bool:
    """Whether the expression stays below `limits.MAX_OFFSET` over the
    domain: a pure function of the two, remembered, as the ends of DMAs
    written alike in one loop ask alike."""
    return bounds_over(expr, _index_ranges(domain), limits.MAX_OFFSET) is not None


def _index_ranges(domain: Domain) -> Callable[[int], tuple[int, int]]:
    """Per kernel dimension, the least and greatest value its index takes
    (a loop of `range(a, b)` from a, not 0; dimensions of loops outside the
    domain: 0)."""
    ranges = {loop.dim: (loop.lower, loop.upper - 1) for loop in domain.loops}
    return lambda dim: ranges.get(dim, (0, 0))


def _check_limit(
    expr: AffineExpr | Pieces, extents: Callable[[int], tuple[int, int]], name: str
) -> None:
    if bounds_over(expr, extents, limits.MAX_OFFSET) is None:
        raise _over_limit(name)


def _over_limit(name: str) -> CopyIRError:
    return CopyIRError(
        errors.INDEX_OVER_LIMIT.format(name=name, limit=limits.MAX_OFFSET)
    )


def _check_block_limit(
    type: BufferedRefType,
    block: list,
    extents: Callable[[int], tuple[int, int]],
    name: str,
) -> None:
    """The byte offset a window copy's block indices make in the array (as
    expand-windows scales them), bounded like a DMA end's address."""
    item = type.window_type.dtype.itemsize
    scales = row_major_strides(type.get_shape(), factor=item)
    for index, dim, scale in zip(block, type.block_dims, scales, strict=True):
        if isinstance(index, AffineExpr | Pieces) and not isinstance(
            index, AffineConstantExpr
        ):
            size = 1 if dim.at_element or dim.kind.data == SQUEEZED else dim.size.data
            _check_limit(index * (scale * size), extents, name)


def _check_slot_limit(
    type: BufferedRefType, slot: AffineExpr | Pieces, domain: Domain, name: str
) -> None:
    """The byte offset of a window's slot in its buffer, bounded like a DMA
    end's address."""
    window = type.window_type
    slot_bytes = window.nbytes // window.get_shape()[0]
    _check_limit(slot * slot_bytes, _index_ranges(domain), name)


@functools.lru_cache(maxsize=4096)
def _first_outside(
    expr: int | AffineExpr | Pieces, last: int, domain: Domain
) -> dict[int, int] | None:
    """The first point of the domain where a subscript's start leaves
    `[0, last]`, or None: a pure function of the three, remembered, as views
    written alike in one loop ask alike."""

    def bad(dims):
        value = _values_at(expr, dims)
        return (value < 0) | (value > last)

    return domain.first(bad)


def _check_subscripts(op: ViewOp | SemIndexOp, accesses: Accesses, domain: Domain):
    type = op.source.type
    shape = type.get_shape() if isinstance(type, RefType | SemaphoreArrayType) else ()
    for dim, (start, (_, size, dropped)) in enumerate(
        zip(op.starts(), op.subscripts(), strict=True)
    ):
        if not isinstance(start, SSAValue) or dim >= len(shape):
            continue
        expr = accesses.index(start)
        extent = shape[dim]
        point = _first_outside(expr, extent - size, domain)
        if point is not None:
            offset = _value_at(expr, point)
            _fail_at(
                domain,
                point,
                lambda p, d=dim, e=extent, o=offset, z=size, x=dropped: (
                    _check_subscript(
                        describe(op.source), _expression(op, p, accesses), d, e, o, z, x
                    )
                ),
            )


def _expression(op: ViewOp | SemIndexOp, point, accesses: Accesses) -> str:
    """The op's subscripts with the point's values, as the static message
    would spell them: `x[64:72, 0:128]`."""
    parts = []
    for start, (_, size, dropped) in zip(op.starts(), op.subscripts(), strict=True):
        value = _value_at(accesses.start(start), point)
        parts.append(str(value) if dropped else f"{value}:{value + size}")
    return f"{describe(op.source)}[{', '.join(parts)}]"


def _check_window(op: BufferedCopyOp, accesses: Accesses, domain: Domain) -> None:
    type = cast(BufferedRefType, op.bref.type)
    name = describe(op.bref)
    indices = op.block_indices
    if indices is not None and any(isinstance(i, SSAValue) for i in indices):
        exprs = [accesses.start(i) for i in indices]
        _check_block_limit(type, exprs, _index_ranges(domain), name)
        shape = type.get_shape()

        def bad(dims):
            wrong = np.zeros(1, bool)
            for value, block, extent in zip(exprs, type.block_dims, shape, strict=True):
                v = _values_at(value, dims)
                wrong = wrong | (v < 0) | (v >= block.count(extent))
            if not padded:  # rounded DMAs, where the indices are inside
                for dim, value in enumerate(exprs):
                    v = np.where(wrong, 0, _values_at(value, dims))
                    wrong = wrong | past_end(type, dim, v)
            return wrong

        padded = is_padded(op.bref)
        point = domain.first(bad)
        if point is not None:
            values = [_value_at(e, point) for e in exprs]
            _fail_at(
                domain, point, lambda p: check_block_indices(name, type, values, padded)
            )
    if op.sem is not None:
        _check_address_limit([op.sem], accesses, domain)
    slot = op.slot_value
    if isinstance(slot, SSAValue):
        expr = accesses.index(slot)
        _check_slot_limit(type, expr, domain, name)
        buffers = type.buffers.data
        point = domain.first(
            lambda dims: (
                (_values_at(expr, dims) < 0) | (_values_at(expr, dims) >= buffers)
            )
        )
        if point is not None:
            value = _value_at(expr, point)

            def static(p):
                raise CopyIRError(
                    errors.SLOT_OUT_OF_RANGE.format(
                        slot=value, bref=name, buffers=buffers
                    )
                )

            _fail_at(domain, point, static)


def _check_overlap(src: SSAValue, dst: SSAValue, accesses: Accesses, domain: Domain):
    first, second = accesses(src), accesses(dst)
    if first is None or second is None or first.root is not second.root:
        return
    if first.is_static and second.is_static:
        return  # verify_accesses decided it

    def bad(dims):
        return first.meets(second, lambda bound: _values_at(bound, dims))

    point = domain.first(bad)
    if point is not None:

        def static(p):
            raise CopyIRError(
                errors.DMA_OVERLAP.format(src=describe(src), dst=describe(dst))
            )

        _fail_at(domain, point, static)


def _check_capacity(op: Operation, target: Target) -> None:
    """No single buffer larger than its memory space (all of them together
    are assign-addresses' business)."""
    if isinstance(op, KernelOp):
        for arg, name in zip(op.params, op.param_names, strict=True):
            try:
                _fits(name, cast(RefType, arg.type), target)  # a kernel's check
            except CopyIRError as err:
                raise err.at(loc_of(arg.location)) from None
    elif isinstance(op, AllocOp):
        _fits(describe(op.result), op.result.type, target)
    elif isinstance(op, BufferedRefOp):
        name = f"the window of {describe(op.result)}"
        _fits(name, op.result.type.window_type, target)


def _fits(name: str, type: RefType, target: Target) -> None:
    space = type.space_name
    if type.nbytes > target.capacity(space):
        raise CopyIRError(
            errors.OVER_CAPACITY.format(
                name=name,
                size=type.nbytes,
                space=space,
                capacity=target.capacity(space),
                target=target.name,
            )
        )


@dataclass(frozen=True)
class VerifyPass(ModulePass):
    """Check the program; report its first error at its line."""

    name = "verify"

    target: str = "default"
    """The target whose capacities bound each buffer."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        verify(op, get_target(self.target))
