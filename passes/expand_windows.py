"""expand-windows: BufferedRefs become VMEM buffers and their copies DMAs.

A `buffered_ref` becomes the `alloc` of its window, `buffers` slots of one
block each. A `buffered_copy` becomes a view of the plain ref, a view of
one slot of the window, and a synchronous DMA between them (a semaphore, a
start, a wait), as Pallas' pipeline `sync_copy` does. Per dimension, for
block index i:

- `Blocked(b)`: rows b*i up to b*(i+1), cut at the array's end (the ragged
  last block); copyir never reads past the array;
- `Element(b)`: elements i up to i+b, cut at the array's end;
- squeezed: element i, and the dimension is dropped;

and the window slice is [slot, 0:size, ...] over the kept dimensions. With
trivial windowing the whole ref is copied to or from the slot. The DMAs are
located at the `buffered_copy`, noted with the block indices and slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
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
    ELEMENT,
    SQUEEZED,
    AllocOp,
    BufferedCopyOp,
    BufferedRefOp,
    BufferedRefType,
    DmaOp,
    SemaphoreOp,
    SemaphoreType,
    Subscript,
    ViewOp,
    check_block_indices,
    describe,
    set_name,
    view_result_type,
)
from copyir.locations import with_detail


def window_slices(
    type: BufferedRefType, indices: Sequence[int], slot: int
) -> tuple[list[Subscript], list[Subscript]]:
    """The array's slice for the block at `indices`, and the window's slice.

    The worked example of DESIGN: shape (1000, 384), blocks (128, 128),
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
        start = index if kind == ELEMENT else index * size
        length = min(size, extent - start)
        array.append((start, length, False))
        window.append((0, length, False))
    return array, window


class AllocateWindow(RewritePattern):
    """Allocate each BufferedRef's window before it; the copies use the window."""

    def __init__(self, windows: dict[SSAValue, SSAValue]):
        self.windows = windows

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


class ExpandBufferedCopy(RewritePattern):
    def __init__(self, windows: dict[SSAValue, SSAValue]):
        self.windows = windows

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BufferedCopyOp, rewriter: PatternRewriter) -> None:
        type: BufferedRefType = op.bref.type
        indices = op.block_indices
        if indices is None:  # trivial windowing: the whole array, block 0
            indices = (0,) * len(type.get_shape())
        check_block_indices(describe(op.bref), type, indices)
        array_slice, window_slice = window_slices(type, indices, op.slot_value)
        location = with_detail(
            op.location,
            f"block ({', '.join(map(str, indices))}{',' if len(indices) == 1 else ''})"
            f" slot {op.slot_value}",
        )
        array = _view(op.plain, array_slice, location)
        window = _view(self.windows[op.bref], window_slice, location)
        src, dst = (array, window) if op.copy_in else (window, array)
        sem = SemaphoreOp.create(result_types=[SemaphoreType()], location=location)
        copies = [
            DmaOp.create(
                operands=[src.results[0], dst.results[0], sem.result],
                properties=DmaOp.option_properties(action, False, 0),
                location=location,
            )
            for action in ("start", "wait")
        ]
        rewriter.replace(op, [array, window, sem, *copies], [])


def _view(
    source: SSAValue, subscripts: list[Subscript], location: Attribute
) -> Operation:
    return ViewOp.create(
        operands=[source],
        properties=ViewOp.subscript_properties(subscripts),
        result_types=[view_result_type(source.type, subscripts)],
        location=location,
    )


@dataclass(frozen=True)
class ExpandWindowsPass(ModulePass):
    """Turn BufferedRefs into window buffers and their copies into DMAs."""

    name = "expand-windows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        windows: dict[SSAValue, SSAValue] = {}
        PatternRewriteWalker(
            GreedyRewritePatternApplier(
                [AllocateWindow(windows), ExpandBufferedCopy(windows)],
                dce_enabled=False,
            ),
            apply_recursively=False,
        ).rewrite_module(op)
        for bref in windows:  # every copy through it now uses its window
            Rewriter.erase_op(bref.owner)
