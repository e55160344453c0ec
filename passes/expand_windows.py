"""expand-windows: BufferedRefs become VMEM buffers and their copies DMAs.

A `buffered_ref` becomes the `alloc` of its window, `buffers` slots of one
block each. A `buffered_copy` becomes a view of the plain ref, a view of
one slot of the window, and the DMAs between them: a semaphore, a start
and a wait for the synchronous form (as Pallas' pipeline `sync_copy`
does), the start alone or the wait alone, on the user's semaphore, for an
asynchronous one. Per dimension, for block index i:

- `Blocked(b)`: rows b*i up to b*(i+1), cut at the array's end (the ragged
  last block); copyir never reads past the array;
- `Element(b)`: elements i up to i+b, cut at the array's end;
- squeezed: element i, and the dimension is dropped;

and the window slice is [slot, 0:size, ...] over the kept dimensions. With
trivial windowing the whole ref is copied to or from the slot.

A block cut by the array's end is copied as Pallas copies it. A
BufferedRef's copy (`emit_pipeline`'s, Pallas' `BufferedRef.copy_in` and
`copy_out`, `_make_block_slice`) rounds the DMA up to the array's TPU
tiling (`copyir.machine.tiling`) in an `Element` or bounded dimension and
in a blocked one whose last block is cut: a cut that is not a whole tile
then reaches past the array, which the verifier reports as interpret mode
does (`buffer_bounds="logical"`), and the rest of the slot keeps what it
held. A `padded` one (a `pallas_call` grid's blocks) copies the cut block
and pads the rest of the slot with poison (`copyir.machine.poison`: NaN,
the dtype's maximum for integers, True for bool), as interpret mode pads
the grid's inputs to whole blocks (`interpret_utils.pad_to_block_dimension`).
Either way a body may read the rest of the slot (an elementwise body
computes on whole windows, and that part of its result is never written
back): the copy marks it written by an opaque computation named `PADDING`
(that `keeps` the bytes for a BufferedRef), so a run reports an output it
reaches.

Block indices and the slot may be index values inside loops. Shapes stay
static: where a block's size depends on its index (the ragged last block
of a `Blocked` dimension, the cut end of an `Element` one), the copy is
split into one copy per size, each under a `copy.when` that selects the
indices of that size, so that every DMA's shape is static. The DMAs are
located at the `buffered_copy`, noted with the block indices and slot.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    IndexType,
    LocationAttr,
    ModuleOp,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineMap,
    AffineSet,
)
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter

from copyir.dialects.copy import (
    DYNAMIC,
    SQUEEZED,
    AllocOp,
    BufferedCopyOp,
    BufferedRefOp,
    BufferedRefType,
    DmaOp,
    IndexOp,
    OpaqueOp,
    SemaphoreOp,
    SemaphoreType,
    Subscript,
    ViewOp,
    WhenOp,
    WindowOp,
    all_given,
    check_block_indices,
    describe,
    is_padded,
    kernel_level,
    rounded,
    set_name,
    tiles,
    view_result_type,
)
from copyir.locations import with_detail
from copyir.machine import PADDING, align_to

Start = int | SSAValue
"""A block index, a slot or a view start: static, or an index value."""


def window_slices(
    type: BufferedRefType, indices: Sequence[int], slot: int
) -> tuple[list[Subscript], list[Subscript]]:
    """The array's slice for the block at `indices`, and the window's slice,
    of the part of the block inside the array (what a `padded` BufferedRef
    copies; Pallas' own rounds it up to the tiling: `moved`).

    A worked example: shape (1000, 384), blocks (128, 128),
    indices (7, 2), slot 0 give rows 896:1000 and columns 256:384 of the
    array, and [0, 0:104, 0:128] of the window.
    """
    array: list[Subscript] = []
    window: list[Subscript] = [(slot, 1, True)]
    for index, block, extent in zip(
        indices, type.block_dims, type.get_shape(), strict=True
    ):
        kind, size = block.kind.data, block.size.data
        if kind == SQUEEZED:
            array.append((index, 1, True))
            continue
        start = block.start(index)
        length = min(size, extent - start)
        array.append((start, length, False))
        window.append((0, length, False))
    return array, window


@dataclass(frozen=True)
class _Case:
    """One static shape of a copy whose block indices are index values: the
    size of each dimension, and the constraints on the indices that select
    it (each `lhs >= 0` or `lhs == 0`, over the index values in `args`)."""

    sizes: tuple[int, ...]
    constraints: tuple[tuple[int, AffineConstraintKind, AffineExpr], ...]


def _cases(type: BufferedRefType, indices: Sequence[object]) -> list[_Case]:
    """Every combination of block sizes a copy can have, with what selects
    it; a dimension whose size never depends on its index contributes one
    option with no constraint."""
    options = []
    d0 = AffineExpr.dimension(0)
    for dim, (index, block, extent) in enumerate(
        zip(indices, type.block_dims, type.get_shape(), strict=True)
    ):
        kind, size = block.kind.data, block.size.data
        if kind == SQUEEZED:
            options.append([(1, ())])
        elif isinstance(index, int):
            start = block.start(index)
            options.append([(min(size, extent - start), ())])
        elif block.at_element:  # i <= extent - size is whole; beyond, one size each
            ge = AffineConstraintKind.ge
            eq = AffineConstraintKind.eq
            choices = (
                [(size, ((dim, ge, AffineExpr.constant(extent - size) - d0),))]
                if extent >= size
                else []
            )
            for cut in range(max(1, extent - size + 1), extent):
                choices.append((extent - cut, ((dim, eq, d0 - cut),)))
            options.append(choices)
        elif extent % size == 0:
            options.append([(size, ())])
        else:
            last = extent // size
            ge, eq = AffineConstraintKind.ge, AffineConstraintKind.eq
            options.append(
                [
                    (size, ((dim, ge, AffineExpr.constant(last - 1) - d0),)),
                    (extent - last * size, ((dim, eq, d0 - last),)),
                ]
            )
    return [
        _Case(tuple(s for s, _ in combo), tuple(c for _, cs in combo for c in cs))
        for combo in itertools.product(*options)
    ]


def moved(type: BufferedRefType, sizes: Sequence[int], padded: bool) -> tuple[int, ...]:
    """What a copy of a block moves, per dimension, given the `sizes` of the
    block inside the array (`_Case.sizes`): those sizes for a `padded`
    BufferedRef, else Pallas' DMA, rounded up to the tiling where Pallas
    rounds (`rounded`: a whole block stays whole, its size being a whole
    number of tiles there)."""
    if padded or not any(rounds := rounded(type)):
        return tuple(sizes)
    return tuple(
        align_to(size, tile) if rounds_here else size
        for size, tile, rounds_here in zip(sizes, tiles(type), rounds, strict=True)
    )


def instruction_count(
    type: BufferedRefType,
    indices: Sequence[object] | None,
    actions: int,
    copy_in: bool,
    padded: bool,
) -> int:
    """How many stream instructions a window copy expands into, at most: per
    case (`_cases`; an index that is not an `int` is dynamic), its
    `actions` DMAs and, for a copy in, a padding computation per dimension
    whose copy leaves part of the slot. The verifier counts them against
    `copyir.limits`."""
    if indices is None:
        indices = (0,) * len(type.get_shape())
    count = 0
    for case in _cases(type, indices):
        count += actions
        if copy_in:
            count += sum(
                block.kind.data != SQUEEZED and size != block.window_extent
                for block, size in zip(
                    type.block_dims, moved(type, case.sizes, padded), strict=True
                )
            )
    return count


class _WindowPattern(RewritePattern):
    """A rewrite that shares the pass's window buffers, by BufferedRef."""

    def __init__(self, windows: dict[SSAValue, SSAValue]):
        self.windows = windows


class AllocateWindow(_WindowPattern):
    """Allocate each BufferedRef's window before it; the copies use the window."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BufferedRefOp, rewriter: PatternRewriter) -> None:
        if op.result in self.windows:
            return
        window = AllocOp.create(
            result_types=[op.result.type.window_type], location=op.location
        )
        set_name(window.results[0], op.result.name_hint)
        self.windows[op.result] = window.results[0]
        rewriter.insert(window, InsertPoint.before(op))


class ExpandWindow(_WindowPattern):
    """A view of one window slot becomes a view of the window buffer."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: WindowOp, rewriter: PatternRewriter) -> None:
        type = cast(BufferedRefType, op.bref.type)
        kept = [
            (0, b.window_extent, False)
            for b in type.block_dims
            if b.kind.data != SQUEEZED
        ]
        view = _view(
            self.windows[op.bref], [(op.slot_value, 1, True), *kept], op.location
        )
        rewriter.replace(op, [view], [view.results[0]])


class ExpandBufferedCopy(_WindowPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BufferedCopyOp, rewriter: PatternRewriter) -> None:
        type = cast(BufferedRefType, op.bref.type)
        indices = op.block_indices
        if indices is None:  # trivial windowing: the whole array, block 0
            indices = (0,) * len(type.get_shape())
        assert all_given(indices)  # verified: an operand per dynamic index
        static = [i for i in indices if isinstance(i, int)]
        if len(static) == len(indices):
            check_block_indices(describe(op.bref), type, static, is_padded(op.bref))
        slot = op.slot_value
        location = with_detail(op.location, _detail(indices, slot))
        if op.action_value is None:
            sem = SemaphoreOp.create(result_types=[SemaphoreType()], location=location)
            rewriter.insert(sem, InsertPoint.before(kernel_level(op)))
            sem_value, actions = sem.result, ("start", "wait")
        else:
            sem_value, actions = op.sem, (op.action_value,)
        new_ops = []
        for case in _cases(type, indices):
            ops = self.copy(op, type, indices, slot, case, sem_value, actions, location)
            if case.constraints:
                ops = [_when(case, indices, ops, location)]
            new_ops += ops
        rewriter.replace(op, new_ops, [])

    def copy(self, op, type, indices, slot, case, sem, actions, location) -> list:
        """The views and DMAs of one case: the array's block, the window slot."""
        ops: list[Operation] = []
        array: list[tuple[Start, int, bool]] = []
        window: list[tuple[Start, int, bool]] = [(slot, 1, True)]
        padded = is_padded(op.bref)
        sizes = moved(type, case.sizes, padded)
        for index, block, size in zip(indices, type.block_dims, sizes, strict=True):
            kind, block_size = block.kind.data, block.size.data
            if kind == SQUEEZED:
                array.append((index, 1, True))
                continue
            start: Start = index
            if not block.at_element:
                start = _scaled(index, block_size, ops, location)
            array.append((start, size, False))
            window.append((0, size, False))
        source = _view(op.plain, array, location)
        slot_view = _view(self.windows[op.bref], window, location)
        ops += [source, slot_view]
        src, dst = (source, slot_view) if op.copy_in else (slot_view, source)
        for action in actions:
            ops.append(
                DmaOp.create(
                    operands=[src.results[0], dst.results[0], sem],
                    properties=DmaOp.option_properties(action, False, 0),
                    location=location,
                )
            )
        if op.copy_in and "start" in actions:
            ops += self.padding(op, type, slot, sizes, not padded, location)
        return ops

    def padding(
        self, op, type: BufferedRefType, slot, sizes, keeps: bool, location
    ) -> list:
        """The opaque computation named `PADDING` over the part of the slot
        that a copy of `sizes` leaves (so that the run follows where it
        goes, and warns where it reaches an output): poison, or what the
        slot held (`keeps`). One slab per such dimension (the dimensions
        before it as copied, those after it whole)."""
        kept = [
            (block.window_extent, size)
            for block, size in zip(type.block_dims, sizes, strict=True)
            if block.kind.data != SQUEEZED
        ]
        ops: list[Operation] = []
        for cut, (full, size) in enumerate(kept):
            if size == full:
                continue
            window = [(slot, 1, True)]
            for dim, (whole, valid) in enumerate(kept):
                if dim < cut:
                    window.append((0, valid, False))
                elif dim == cut:
                    window.append((valid, whole - valid, False))
                else:
                    window.append((0, whole, False))
            slab = _view(self.windows[op.bref], window, location)
            padding = OpaqueOp(PADDING, [], [slab.results[0]], keeps=keeps)
            padding.location = location
            ops += [slab, padding]
        return ops


def _detail(indices: Sequence[Start], slot: Start) -> str:
    def text(x: Start) -> str:
        return describe(x) if isinstance(x, SSAValue) else str(x)

    comma = "," if len(indices) == 1 else ""
    return f"block ({', '.join(map(text, indices))}{comma}) slot {text(slot)}"


def _scaled(index: Start, factor: int, ops: list, location) -> Start:
    """b * i, as an integer or a new index value."""
    if isinstance(index, int):
        return index * factor
    if factor == 1:
        return index
    scaled = IndexOp.create(
        operands=[index],
        properties={
            "map": AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) * factor,)))
        },
        result_types=[IndexType()],
        location=location,
    )
    ops.append(scaled)
    return scaled.result


def _when(case: _Case, indices: Sequence[Start], body: list, location) -> WhenOp:
    """The case's copy under the condition that selects it."""
    dims = sorted({dim for dim, _, _ in case.constraints})
    args = [cast(SSAValue, indices[d]) for d in dims]  # dynamic: constrained
    constraints = tuple(
        AffineConstraintExpr(
            kind,
            expr.replace_dims_and_symbols([AffineExpr.dimension(dims.index(dim))], []),
            AffineExpr.constant(0),
            canonicalize=False,
        )
        for dim, kind, expr in case.constraints
    )
    condition = ArrayAttr([AffineSetAttr(AffineSet(len(args), 0, constraints))])
    return WhenOp.create(
        operands=args,
        properties={"condition": condition},
        regions=[Region(Block(body))],
        location=location,
    )


def _view(
    source: SSAValue,
    subscripts: list[tuple[Start, int, bool]],
    location: LocationAttr,
) -> Operation:
    static = [
        (DYNAMIC if isinstance(start, SSAValue) else start, size, dropped)
        for start, size, dropped in subscripts
    ]
    dynamic = [start for start, _, _ in subscripts if isinstance(start, SSAValue)]
    return ViewOp.create(
        operands=[source, *dynamic],
        properties=ViewOp.subscript_properties(static),
        result_types=[view_result_type(source.type, static)],
        location=location,
    )


@dataclass(frozen=True)
class ExpandWindowsPass(ModulePass):
    """Turn BufferedRefs into window buffers and their copies into DMAs."""

    name = "expand-windows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not any(isinstance(o, BufferedRefOp) for o in op.walk()):
            return  # a walk that rewrites nothing costs far more than a look
        windows: dict[SSAValue, SSAValue] = {}
        PatternRewriteWalker(
            GreedyRewritePatternApplier(
                [
                    AllocateWindow(windows),
                    ExpandWindow(windows),
                    ExpandBufferedCopy(windows),
                ],
                dce_enabled=False,
            ),
            apply_recursively=False,
        ).rewrite_module(op)
        for bref in windows:  # every copy through it now uses its window
            Rewriter.erase_op(cast(Operation, bref.owner))  # a buffered_ref's
