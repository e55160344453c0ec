"""The reference path: the high-level program run directly, in plain numpy.

Each op means what it says, at once: a DMA start is an immediate copy (or
add), a wait does nothing, a `sync_copy` copies leaf by leaf, a view is
numpy slicing, and a `buffered_copy` takes its block with numpy's own
slicing, `x[b*i : b*(i+1)]`, whose cut at the array's end is exactly the
ragged-edge rule. Memory nobody writes holds the same poison as in the
interpreter (`copyir.machine.poison`, Pallas' interpret mode's values).

Loops run directly too, as xDSL's `scf` interpreter runs `scf.for`: a
`copy.for` evaluates its bounds and runs its body once per index tuple,
row-major with the last index fastest (parallel dimensions run in order
here); a `copy.when` evaluates its affine sets; a `copy.scope` runs its
body, its allocs making fresh poisoned arrays on every entry; a
`copy.index` evaluates its map with xDSL's `AffineMap.eval`, in plain
Python integers (a `min` or `max` one, Python's `min` or `max` of its
results). A descriptor
(`copy.async_copy`) is the (src, dst) pair of views evaluated where it is
made; starting it copies at once and waiting it does nothing, and so for an
asynchronous `buffered_copy`. A `copy.compute` runs its region of scalar
ops on whole arrays, one numpy ufunc per op in the destination's dtype, so
that each operation rounds in that dtype (bfloat16 after every one),
integers wrap, and `max`/`min` propagate NaN as `np.maximum`/`np.minimum`.
A `copy.opaque` writes poison into each ref it writes.

It shares no index or address arithmetic with the lowering (nothing from
`copyir.index`, `copyir.access` or the passes, and not
`copyir.compute.compile_expression`), so that comparing the two checks
something. A dynamic start that falls outside its ref is an error here (never
numpy's silent clipping), named at its op and iteration.

Written with xDSL's interpreter framework: one function per op.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self, cast

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstraintKind, AffineSet

from copyir import errors
from copyir.dialects import scalar
from copyir.dialects.copy import (
    BLOCKED,
    BOUNDED,
    DYNAMIC,
    ELEMENT,
    SQUEEZED,
    AllocOp,
    AsyncCopyOp,
    AsyncDmaOp,
    BufferedCopyOp,
    BufferedRefOp,
    BufferedRefType,
    ComputeOp,
    DmaOp,
    ForOp,
    IndexOp,
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
    describe,
    is_padded,
    past_end_error,
)
from copyir.errors import CopyIRError
from copyir.locations import loc_of
from copyir.machine import poison, tiling


def poisoned(type: RefType | BufferedRefType) -> np.ndarray:
    """An array of the type's shape and dtype holding poison."""
    dtype = (
        type.dtype.numpy if isinstance(type, RefType) else type.array_type.dtype.numpy
    )
    shape = (
        type.get_shape() if isinstance(type, RefType) else type.window_type.get_shape()
    )
    return np.full(shape, poison(dtype), dtype)


def copy(src: np.ndarray, dst: np.ndarray, add: bool) -> None:
    if add:
        dst += src
    else:
        dst[...] = src


# --------------------------------------------------------------------------
# Conditions and computations, evaluated plainly
# --------------------------------------------------------------------------

_COMPARE: dict[AffineConstraintKind, Callable[[int, int], bool]] = {
    AffineConstraintKind.ge: lambda a, b: a >= b,
    AffineConstraintKind.le: lambda a, b: a <= b,
    AffineConstraintKind.eq: lambda a, b: a == b,
}


def holds_at(affine_set: AffineSet, dims: Sequence[int]) -> bool:
    """Every constraint of the set holds at `dims` (Python integers)."""
    return all(
        _COMPARE[c.kind](c.lhs.eval(dims, ()), c.rhs.eval(dims, ()))
        for c in affine_set.constraints
    )


@functools.lru_cache(maxsize=1024)
def literal(text: str, dtype: np.dtype) -> np.ndarray:
    """A literal as a 0-d array of its dtype (the verifier has checked that
    it fits: no float literal for integers, no overflow); made once, not
    per iteration, and only ever read."""
    if np.issubdtype(dtype, np.integer):
        return np.array(int(text), dtype)
    return np.array(float(text), dtype)


@register_impls
class ScalarReference(InterpreterFunctions):
    """The meaning of each scalar op: one numpy ufunc whose operands are
    all of the op's dtype, so that numpy (and ml_dtypes for bfloat16)
    keeps the dtype and rounds, or wraps, after every operation."""

    @impl(scalar.AddOp)
    def run_add(self, interpreter: Interpreter, op: scalar.AddOp, args):
        return (np.add(*args),)

    @impl(scalar.SubOp)
    def run_sub(self, interpreter: Interpreter, op: scalar.SubOp, args):
        return (np.subtract(*args),)

    @impl(scalar.MulOp)
    def run_mul(self, interpreter: Interpreter, op: scalar.MulOp, args):
        return (np.multiply(*args),)

    @impl(scalar.DivOp)
    def run_div(self, interpreter: Interpreter, op: scalar.DivOp, args):
        return (np.true_divide(*args),)

    @impl(scalar.MaxOp)
    def run_max(self, interpreter: Interpreter, op: scalar.MaxOp, args):
        return (np.maximum(*args),)  # NaN if either is

    @impl(scalar.MinOp)
    def run_min(self, interpreter: Interpreter, op: scalar.MinOp, args):
        return (np.minimum(*args),)

    @impl(scalar.NegOp)
    def run_neg(self, interpreter: Interpreter, op: scalar.NegOp, args):
        return (np.negative(*args),)

    @impl(scalar.ConstantOp)
    def run_constant(self, interpreter: Interpreter, op: scalar.ConstantOp, args):
        return (literal(op.literal.data, scalar.dtype_of(op.result.type).numpy),)

    @impl_terminator(scalar.YieldOp)
    def run_yield(self, interpreter: Interpreter, op: scalar.YieldOp, args):
        return ReturnedValues(args), ()


# --------------------------------------------------------------------------
# The ops
# --------------------------------------------------------------------------


@register_impls
class CopyReference(InterpreterFunctions):
    """The meaning of each copy-dialect op, with numpy arrays as refs.

    What an op's properties say is read once into `plans` (reading them
    through xDSL costs more than the numpy work of a small copy); `loops`
    holds, for each `copy.for` being run (outermost first), the op and its
    current index tuple, so that an error names its iteration.
    """

    def __init__(self) -> None:
        self.loops: list[list[Any]] = []
        self.plans: dict[Operation, Any] = {}
        self.values: dict[SSAValue, Any] = {}
        self.blocks: dict[Block, list[tuple[Operation, tuple, tuple]]] = {}

    def run_block(
        self, interpreter: Interpreter, block: Block, args: PythonValues
    ) -> None:
        """Run a block's ops in order through the interpreter's `run_op`.

        This is `Interpreter.run_ssacfg_region` without its fresh scope per
        run: every value lives in one dict, and a value of a loop body is
        simply set again in the next iteration (the verifier checks that
        each use follows its definition). A loop body runs about a fifth
        faster this way (the double buffer: 115 against 145 us per
        iteration, most of the rest being xDSL's dispatch in `run_op`).
        """
        values = self.values
        values.update(zip(block.args, args, strict=True))
        ops = self.blocks.get(block)
        if ops is None:
            ops = self.blocks[block] = [
                (op, tuple(op.operands), tuple(op.results)) for op in block.ops
            ]
        for op, operands, results in ops:
            outputs = interpreter.run_op(op, tuple(values[v] for v in operands))
            if results:
                values.update(zip(results, outputs, strict=True))

    def plan(self, op: Operation, make: Callable[[], Any]) -> Any:
        """What `make` reads from the op, read on the op's first run."""
        plan = self.plans.get(op)
        if plan is None:
            plan = self.plans[op] = make()
        return plan

    def fail(self, op: Operation, message: str) -> CopyIRError:
        """An error at the op, its message ending with the iteration."""
        where = ", ".join(
            f"{describe(index)} = {value}"
            for loop, values in self.loops
            for index, value in zip(loop.indices, values, strict=True)
        )
        if where:
            message = f"{message}, at {where}"
        return CopyIRError(message, loc_of(op.location))

    @impl(AllocOp)
    def run_alloc(self, interpreter: Interpreter, op: AllocOp, args: PythonValues):
        return (poisoned(op.result.type),)

    @impl(SemaphoreOp)
    def run_semaphore(self, interpreter: Interpreter, op: SemaphoreOp, args):
        return (None,)  # every DMA is immediate: semaphores have nothing to count

    @impl(SemIndexOp)
    def run_sem_index(self, interpreter: Interpreter, op: SemIndexOp, args):
        dims, extents = self.plan(op, lambda: _sem_index_plan(op))
        for dim, extent, index in zip(dims, extents, args[1:], strict=True):
            if not 0 <= index < extent:
                self.index_error(op, dim, index, extent)
        return (None,)

    @impl(ViewOp)
    def run_view(self, interpreter: Interpreter, op: ViewOp, args: PythonValues):
        static, dynamic = self.plan(op, lambda: _view_plan(op))
        if not dynamic:
            return (args[0][static],)
        index = list(static)
        for (dim, size, dropped, extent), start in zip(dynamic, args[1:], strict=True):
            if start < 0 or start + size > extent:
                if dropped:
                    self.index_error(op, dim, start, extent)
                self.slice_error(op, dim, start, size, extent)
            index[dim] = start if dropped else slice(start, start + size)
        return (args[0][tuple(index)],)

    def index_error(self, op: ViewOp | SemIndexOp, dim: int, index: int, extent: int):
        if index < 0:
            message = errors.NEGATIVE_INDEX.format(index=index, expr=op.expression())
        else:
            message = errors.INDEX_OUT_OF_BOUNDS.format(
                index=index, dim=dim, name=describe(op.source), size=extent
            )
        raise self.fail(op, message)

    def slice_error(self, op: ViewOp, dim: int, start: int, size: int, extent: int):
        if start < 0:
            message = errors.NEGATIVE_INDEX.format(index=start, expr=op.expression())
        else:
            message = errors.SLICE_OUT_OF_BOUNDS.format(
                start=start,
                stop=start + size,
                dim=dim,
                name=describe(op.source),
                size=extent,
            )
        raise self.fail(op, message)

    @impl(DmaOp)
    def run_dma(self, interpreter: Interpreter, op: DmaOp, args: PythonValues):
        start, add = self.plan(op, lambda: (op.is_start, op.add is not None))
        if start:
            copy(args[0], args[1], add)
        return ()

    @impl(SyncCopyOp)
    def run_sync_copy(self, interpreter: Interpreter, op: SyncCopyOp, args):
        leaves, add = self.plan(op, lambda: (len(op.srcs), op.add is not None))
        for src, dst in zip(args[:leaves], args[leaves:], strict=True):
            copy(src, dst, add)
        return ()

    @impl(BufferedRefOp)
    def run_buffered_ref(self, interpreter: Interpreter, op: BufferedRefOp, args):
        return (poisoned(op.result.type),)

    @impl(BufferedCopyOp)
    def run_buffered_copy(self, interpreter: Interpreter, op: BufferedCopyOp, args):
        plan: _WindowPlan = self.plan(op, lambda: _WindowPlan.of(op))
        if plan.action == "wait":
            return ()  # its start copied at once
        window, array = (args[1], args[0]) if plan.copy_in else (args[0], args[1])
        dynamic = iter(args[2 : 2 + plan.dynamic_indices])
        indices = [next(dynamic) if i == DYNAMIC else i for i in plan.indices]
        slot = args[2 + plan.dynamic_indices] if plan.dynamic_slot else plan.slot
        if not 0 <= slot < plan.buffers:
            raise self.fail(
                op,
                errors.SLOT_OUT_OF_RANGE.format(
                    slot=slot, bref=describe(op.bref), buffers=plan.buffers
                ),
            )
        block = array[(*self.block_index(op, plan, indices), ...)]
        if plan.copy_in and plan.tiles is None:  # padded: poison past the cut
            window[slot, ...] = poisoned(cast(BufferedRefType, op.bref.type))[0]
        slot = window[(slot, *(slice(0, n) for n in block.shape), ...)]
        if plan.copy_in:
            slot[...] = block
        else:
            block[...] = slot
        return ()

    def block_index(
        self, op: BufferedCopyOp, plan: _WindowPlan, indices: Sequence[int]
    ) -> list[int | slice]:
        """The numpy index of what the copy moves (see `block_slices`)."""
        name = describe(op.bref)
        index = block_slices(plan.blocks, plan.shape, indices)
        if isinstance(index, int):
            message = block_error(name, plan.blocks, plan.shape, indices, index)
            raise self.fail(op, message)
        type = cast(BufferedRefType, op.bref.type)
        return self.rounded(op, name, type, index, indices, plan.tiles)

    def rounded(
        self,
        op: Operation,
        name: str,
        type: BufferedRefType,
        index: list[int | slice],
        indices: Sequence[int],
        tiles: tuple[int, ...] | None,
    ) -> list[int | slice]:
        """A block's numpy index as Pallas' BufferedRef moves it (`tiles`:
        `pallas_tiles`; None for a padded one), or the error of one that
        reaches past the end."""
        if tiles is None:
            return index
        moved = rounded_slices(index, type.get_shape(), tiles)
        if isinstance(moved, int):
            raise self.fail(op, past_end_error(name, type, moved, indices[moved]))
        return moved

    @impl(ForOp)
    def run_for(self, interpreter: Interpreter, op: ForOp, args: PythonValues):
        frame: list[Any] = [op, ()]
        self.loops.append(frame)
        body = op.body.block
        for indices in itertools.product(*(range(lo, hi) for lo, hi in op.bounds)):
            frame[1] = indices
            self.run_block(interpreter, body, indices)
        self.loops.pop()
        return ()

    @impl(WhenOp)
    def run_when(self, interpreter: Interpreter, op: WhenOp, args: PythonValues):
        sets = self.plan(op, lambda: [s.data for s in op.condition.data])
        if any(holds_at(s, args) for s in sets):
            self.run_block(interpreter, op.body.block, ())
        return ()

    @impl(ScopeOp)
    def run_scope(self, interpreter: Interpreter, op: ScopeOp, args: PythonValues):
        """Its body, whose allocs make fresh poisoned arrays on each run
        (every DMA is immediate: nothing is in flight at its end)."""
        self.run_block(interpreter, op.body.block, ())
        return ()

    @impl(IndexOp)
    def run_index(self, interpreter: Interpreter, op: IndexOp, args: PythonValues):
        results = self.plan(op, lambda: op.map.data).eval(args, ())
        kind = op.combine_kind
        return results if kind is None else ({"min": min, "max": max}[kind](results),)

    @impl(AsyncCopyOp)
    def run_async_copy(self, interpreter: Interpreter, op: AsyncCopyOp, args):
        return ((args[0], args[1]),)  # the views as evaluated here

    @impl(AsyncDmaOp)
    def run_async_dma(self, interpreter: Interpreter, op: AsyncDmaOp, args):
        start, add = self.plan(op, lambda: (op.is_start, op.add is not None))
        if start:
            src, dst = args[0]
            copy(src, dst, add)
        return ()

    @impl(WindowOp)
    def run_window(self, interpreter: Interpreter, op: WindowOp, args: PythonValues):
        slot, buffers = self.plan(
            op,
            lambda: (op.slot_value, cast(BufferedRefType, op.bref.type).buffers.data),
        )
        if not isinstance(slot, int):
            slot = args[1]
        if not 0 <= slot < buffers:
            message = errors.SLOT_OUT_OF_RANGE.format(
                slot=slot, bref=describe(op.bref), buffers=buffers
            )
            raise self.fail(op, message)
        return (args[0][slot, ...],)

    @impl(InvalidateOp)
    def run_invalidate(self, interpreter: Interpreter, op: InvalidateOp, args):
        return ()  # unwritten memory matters to the checker, not to the values

    @impl(OpaqueOp)
    def run_opaque(self, interpreter: Interpreter, op: OpaqueOp, args):
        """Poison into every ref it writes, unless it `keeps` their bytes
        (its reads matter to the checker, not to the values)."""
        if op.keeps is not None:
            return ()
        for value, array in zip(op.writes, args[len(op.reads) :], strict=True):
            array[...] = poisoned(cast(RefType, value.type))
        return ()

    @impl(PipelineOp)
    def run_pipeline(self, interpreter: Interpreter, op: PipelineOp, args):
        """`emit_pipeline` by what it means, not by its schedule: at each
        grid point, row-major, an input's window holds its current block
        (fetched when the block changes), the body runs, and an output's
        window goes back to its block when the next step's block differs or
        at the last step; an output window persists while its block stays,
        so revisits accumulate. Each window has its slots, used in turn as
        the block changes (Pallas' `BufferedRef` swaps its slot then): an
        input's slot holds its block, poison past a cut one's edge; an
        output's slot keeps what it held (poison at first use), and all of
        it goes back, so rows the body did not write carry that. With
        `no_pipelining` Pallas never advances a slot: each window is one."""
        specs: list[_PipelineSpec] = self.plan(op, lambda: _PipelineSpec.of(op))
        single = op.no_pipelining is not None
        slots = [
            [poisoned(spec.window) for _ in range(1 if single else spec.buffers)]
            for spec in specs
        ]
        changes = [0] * len(specs)
        windows: list[np.ndarray] = [s[0] for s in slots]
        frame: list[Any] = [op, ()]
        self.loops.append(frame)
        points = list(itertools.product(*(range(n) for n in op.grid_shape)))
        blocks = [[spec.index_map.eval(p, ()) for p in points] for spec in specs]
        for step, point in enumerate(points):
            frame[1] = point
            parts = []
            for number, spec in enumerate(specs):
                index = self.pipeline_block(op, spec, blocks[number][step])
                part = args[number][index]
                parts.append(part)
                if spec.aliased:  # an operand in VMEM: its window is the block
                    windows[number] = part.reshape(spec.window.get_shape())
                    continue
                if step and blocks[number][step] == blocks[number][step - 1]:
                    continue  # the block stays: so does its window
                windows[number] = slots[number][changes[number] % len(slots[number])]
                changes[number] += 1
                if spec.fetched:
                    if spec.tiles is None:  # a kernel grid's: poison past the cut
                        windows[number][...] = poisoned(spec.window)
                    windows[number][tuple(slice(0, n) for n in part.shape)] = part
            self.run_block(interpreter, op.body.block, (*windows, *point))
            for number, spec in enumerate(specs):
                last = step + 1 == len(points)
                if (spec.output and not spec.aliased) and (
                    last or blocks[number][step + 1] != blocks[number][step]
                ):
                    part = parts[number]
                    part[...] = windows[number][tuple(slice(0, n) for n in part.shape)]
        self.loops.pop()
        return ()

    def pipeline_block(
        self, op: PipelineOp, spec: _PipelineSpec, indices: Sequence[int]
    ) -> tuple:
        """The numpy index of what an operand's copy moves (see
        `block_slices`; `rounded` on emit_pipeline's copies)."""
        index = block_slices(spec.blocks, spec.shape, indices)
        if isinstance(index, int):
            message = block_error(spec.name, spec.blocks, spec.shape, indices, index)
            raise self.fail(op, message)
        moved = self.rounded(op, spec.name, spec.bref, index, indices, spec.tiles)
        return (*moved, ...)

    @impl(ComputeOp)
    def run_compute(self, interpreter: Interpreter, op: ComputeOp, args):
        """The region, run once on whole arrays (`ScalarReference`)."""
        dst = args[0]
        with np.errstate(all="ignore"):  # overflow and NaN are the semantics
            (value,) = interpreter.run_ssacfg_region(op.body, args[1:], "compute")
            dst[...] = value
        return ()


def block_slices(
    blocks: Sequence[tuple[str, int]], shape: Sequence[int], indices: Sequence[int]
) -> list[int | slice] | int:
    """The numpy index of a block: `Blocked(b)` rows b*i up to b*(i+1)
    (numpy cuts the last one at the array's end), `Element(b)` rows i up to
    i+b (cut likewise), squeezed dimensions indexed; or the first dimension
    whose index falls outside the array."""
    index: list[int | slice] = []
    for dim, ((kind, size), i, extent) in enumerate(
        zip(blocks, indices, shape, strict=True)
    ):
        start = i * size if kind == BLOCKED else i
        if i < 0 or start >= extent:
            return dim
        index.append(i if kind == SQUEEZED else slice(start, start + size))
    return index


def pallas_tiles(type: BufferedRefType, padded: bool) -> tuple[int, ...] | None:
    """Per dimension, the tile Pallas' BufferedRef rounds a copy to: the
    array's tiling (`copyir.machine.tiling`) in an `Element` or bounded
    dimension and in a blocked one whose last block is cut, 1 elsewhere;
    None for a padded BufferedRef (a kernel grid's), which never rounds."""
    if padded:
        return None
    shape = type.get_shape()
    rounds = [
        b.kind.data in (ELEMENT, BOUNDED)
        or (b.kind.data == BLOCKED and extent % b.size.data != 0)
        for b, extent in zip(type.block_dims, shape, strict=True)
    ]
    if not any(rounds):
        return (1,) * len(shape)
    itemsize = type.array_type.dtype.itemsize
    return tuple(
        t if r else 1 for t, r in zip(tiling(shape, itemsize), rounds, strict=True)
    )


def rounded_slices(
    index: list[int | slice], shape: Sequence[int], tiles: Sequence[int]
) -> list[int | slice] | int:
    """A block's numpy index (`block_slices`) as Pallas' BufferedRef copies
    it (`_make_block_slice`, JAX 0.12): the size inside the array rounded
    up to the dimension's tile (`pallas_tiles`). Or the first dimension
    where that reaches past the array's end."""
    out: list[int | slice] = []
    for dim, (part, extent, tile) in enumerate(zip(index, shape, tiles, strict=True)):
        if isinstance(part, int):
            out.append(part)
            continue
        size = min(part.stop, extent) - part.start
        stop = part.start + -(-size // tile) * tile
        if stop > extent:
            return dim
        out.append(slice(part.start, stop))
    return out


def block_error(
    name: str,
    blocks: Sequence[tuple[str, int]],
    shape: Sequence[int],
    indices: Sequence[int],
    dim: int,
) -> str:
    """The message for block indices whose `dim` falls outside the array."""
    i, (kind, size), extent = indices[dim], blocks[dim], shape[dim]
    if i < 0:
        expr = f"{name}[{', '.join(map(str, indices))}]"
        return errors.NEGATIVE_INDEX.format(index=i, expr=expr)
    if kind in (ELEMENT, BOUNDED):
        return errors.ELEMENT_INDEX_OUT_OF_BOUNDS.format(
            index=i, dim=dim, bref=name, extent=extent
        )
    count = extent if kind == SQUEEZED else -(-extent // size)
    return errors.BLOCK_INDEX_OUT_OF_BOUNDS.format(
        index=i, dim=dim, bref=name, extent=count
    )


def _view_plan(op: ViewOp) -> tuple[tuple, list[tuple[int, int, bool, int]]]:
    """A view's numpy index with its static subscripts in place, and each
    dynamic one as (dimension, size, dropped, the source's extent there)."""
    shape = cast(RefType, op.source.type).get_shape()
    static: list[Any] = []
    dynamic = []
    for dim, (offset, size, dropped) in enumerate(op.subscripts()):
        if offset == DYNAMIC:
            dynamic.append((dim, size, dropped, shape[dim]))
            static.append(None)
        else:
            static.append(offset if dropped else slice(offset, offset + size))
    return (*static, Ellipsis), dynamic  # `...`: a view even when all are indexed


def _sem_index_plan(op: SemIndexOp) -> tuple[list[int], list[int]]:
    """The dimensions of a semaphore index's dynamic indices, and their extents."""
    type = op.source.type
    shape = type.get_shape() if isinstance(type, SemaphoreArrayType) else ()
    dims = [d for d, i in enumerate(op.indices.get_values()) if i == DYNAMIC]
    return dims, [shape[d] for d in dims]


@dataclass(frozen=True)
class _WindowPlan:
    """What a buffered_copy's properties say, read once."""

    action: str | None
    copy_in: bool
    indices: tuple[int, ...]
    dynamic_indices: int
    dynamic_slot: bool
    slot: int
    buffers: int
    blocks: tuple[tuple[str, int], ...]
    shape: tuple[int, ...]
    tiles: tuple[int, ...] | None
    """`pallas_tiles`: None for a padded BufferedRef."""

    @classmethod
    def of(cls, op: BufferedCopyOp) -> _WindowPlan:
        type = cast(BufferedRefType, op.bref.type)
        attr = op.dst_indices if op.copy_in else op.src_indices
        shape = type.get_shape()
        slot = op.slot_value
        return cls(
            action=op.action_value,
            copy_in=op.copy_in,
            indices=attr.get_values() if attr is not None else (0,) * len(shape),
            dynamic_indices=len(op.dynamic_indices),
            dynamic_slot=op.dynamic_slot is not None,
            slot=slot if isinstance(slot, int) else 0,
            buffers=type.buffers.data,
            blocks=tuple((b.kind.data, b.size.data) for b in type.block_dims),
            shape=shape,
            tiles=pallas_tiles(type, is_padded(op.bref)),
        )


@dataclass(frozen=True)
class _PipelineSpec:
    """One operand of a pipeline, read once: direction, block, index map,
    the window's type and its number of slots."""

    name: str
    output: bool
    fetched: bool
    """Its window holds its block at each first visit (`in`, `inout`)."""
    aliased: bool
    """It is in VMEM: its window is a view of it at the block."""
    blocks: tuple[tuple[str, int], ...]
    shape: tuple[int, ...]
    index_map: Any
    window: RefType
    buffers: int
    bref: BufferedRefType
    tiles: tuple[int, ...] | None
    """`pallas_tiles`: None on a kernel grid, whose blocks are padded, and
    for an operand in VMEM, which is viewed (never copied)."""

    @classmethod
    def of(cls, op: PipelineOp) -> list[Self]:
        return [
            cls(
                name=describe(ref),
                output=output,
                fetched=spec.input,
                aliased=viewed,
                blocks=tuple((b.kind.data, b.size.data) for b in bref.block_dims),
                shape=bref.get_shape(),
                index_map=index_map.data,
                window=cast(RefType, window.type),
                buffers=bref.buffers.data,
                bref=bref,
                tiles=pallas_tiles(bref, op.kernel_grid is not None or viewed),
            )
            for (ref, output, bref, index_map), window, spec in zip(
                op.specs(), op.windows, op.ref_specs.data, strict=True
            )
            for viewed in [op.viewed(ref)]
        ]


def run_reference(
    kernel: KernelOp, inputs: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Every parameter's final value after running the kernel directly.

    Inputs are copied; a parameter not given starts poisoned.
    """
    params = []
    for arg, name in zip(kernel.params, kernel.param_names, strict=True):
        type = cast(RefType, arg.type)  # verified: the parameters are refs
        if name in inputs:
            params.append(np.array(inputs[name], dtype=type.dtype.numpy, copy=True))
        else:
            params.append(poisoned(type))
    interpreter = Interpreter(_module_of(kernel))
    functions = CopyReference()
    interpreter.register_implementations(functions)
    interpreter.register_implementations(ScalarReference())
    try:
        functions.run_block(interpreter, kernel.body.block, tuple(params))
    except CopyIRError as err:
        err.__notes__ = []  # xDSL's interpreter notes the whole module per level
        raise
    return dict(zip(kernel.param_names, params, strict=True))


def _module_of(kernel: KernelOp) -> Any:
    return kernel.parent_op() or kernel
