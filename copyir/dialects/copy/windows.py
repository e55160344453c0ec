"""BufferedRefs and their windows: `copy.buffered_ref`, the copies between a
ref and one window slot (`copy.buffered_copy`, Pallas' `BufferedRef.copy_in`
and `copy_out`) and one slot as a ref (`copy.window`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils import split_dynamic_index_list
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    OptionalOperandVariable,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect, Pure

from copyir import errors
from copyir.attributes import i64_array, segment_sizes
from copyir.errors import CopyIRError
from copyir.machine import align_to, lanes_packing, tiling

from .base import (
    ACTIONS,
    ActionConstraint,
    CopyOp,
    DmaAction,
    action_attr,
    check_action,
    describe,
    describe_type,
    expect_ref,
    expect_semaphore,
    set_name,
)
from .indexing import (
    Index,
    all_given,
    index_text,
    mixed,
    parse_optional_index_list,
    print_index_list,
    resolve_indices,
)
from .types import (
    BOUNDED,
    DYNAMIC,
    SQUEEZED,
    BlockDimAttr,
    BufferedRefType,
    RefType,
    SemaphoreType,
    parse_i64,
    ref_type,
)


def slot_of(dynamic: SSAValue | None, static: IntegerAttr | None) -> int | SSAValue:
    """A window slot: an integer, or the index value it takes."""
    if dynamic is not None:
        return dynamic
    return static.value.data if static is not None else 0


def check_slot(slot: int | SSAValue, bref: SSAValue) -> None:
    """A static slot is one of the BufferedRef's buffers."""
    buffers = cast(BufferedRefType, bref.type).buffers.data
    if isinstance(slot, int) and not 0 <= slot < buffers:
        raise CopyIRError(
            errors.SLOT_OUT_OF_RANGE.format(
                slot=slot, bref=describe(bref), buffers=buffers
            )
        )


@irdl_custom_directive
class Slot(CustomDirective):
    """A window slot, `7` or `%s`: a static slot property or an index value."""

    dynamic: OptionalOperandVariable
    static: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        static, operand = parse_slot(parser)
        self.dynamic.set(state, operand)
        if operand is None:
            self.static.set(state, IntegerAttr(static, i64))
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        static = cast(IntegerAttr | None, self.static.get(op))
        print_slot(printer, slot_of(self.dynamic.get(op), static))


def parse_slot(parser: Parser) -> tuple[int, UnresolvedOperand | None]:
    """`7` or `%s`: a static slot (0 when it is a value) and the value."""
    operand = parser.parse_optional_unresolved_operand()
    return (0 if operand is not None else parse_i64(parser)), operand


def print_slot(printer: Printer, slot: int | SSAValue) -> None:
    if isinstance(slot, SSAValue):
        printer.print_operand(slot)
    else:
        printer.print_string(str(slot))


@irdl_op_definition
class BufferedRefOp(CopyOp):
    """A BufferedRef: `%bx = copy.buffered_ref : !copy.buffered<...>`.

    Its window, `buffers` slots of one block each, lives in VMEM (or SMEM).
    A block cut by the array's end is copied as Pallas' `BufferedRef`
    copies it (`emit_pipeline`): the DMA rounded up to the array's TPU
    tiling (`copyir.machine.tiling`), the rest of the slot keeping what it
    held. `padded` (a `pallas_call` grid's blocks) copies the cut block
    and pads the rest with poison, as interpret mode pads the inputs to
    whole blocks.
    """

    name = "copy.buffered_ref"

    result = result_def(BufferedRefType)
    padded = opt_prop_def(UnitAttr)

    assembly_format = "(`padded` $padded^)? attr-dict `:` type($result)"

    def __init__(
        self, type: BufferedRefType, name: str | None = None, padded: bool = False
    ):
        super().__init__(
            result_types=[type], properties={"padded": UnitAttr()} if padded else {}
        )
        set_name(self.result, name)

    def check(self) -> None:
        self.check_type(
            self.result.type, describe(self.result), self.padded is not None
        )

    @staticmethod
    def check_type(type: BufferedRefType, name: str, padded: bool = True) -> None:
        """A BufferedRef's type: the block shape against the array, the
        buffer count, the window's space (a pipeline's operands too); with
        Pallas' rounding to the tiling (not `padded`), the block against
        the tiling."""
        array = type.get_shape()
        RefType(array, type.element_type, "hbm")  # dtype and dimensions
        block = type.block_dims
        if len(block) != len(array):
            raise CopyIRError(
                errors.BLOCK_RANK.format(
                    block=_block_text(block), block_rank=len(block), rank=len(array)
                )
            )
        for dim, (b, extent) in enumerate(zip(block, array, strict=False)):
            if b.kind.data == BOUNDED and not 1 <= b.size.data <= b.bound.data:
                raise CopyIRError(
                    errors.BOUNDED_SIZE.format(
                        bound=b.bound.data, dim=dim, size=b.size.data
                    )
                )
            if b.kind.data != SQUEEZED and not 1 <= b.window_extent <= extent:
                raise CopyIRError(
                    errors.BLOCK_SIZE.format(
                        size=b.window_extent, dim=dim, extent=extent
                    )
                )
        if type.buffers.data < 1:
            raise CopyIRError(errors.BAD_BUFFERS.format(buffers=type.buffers.data))
        if type.space.data not in ("vmem", "smem"):
            raise CopyIRError(errors.WINDOW_SPACE.format(space=type.space.data))
        if not padded:
            check_tiling(type)


def is_padded(bref: SSAValue) -> bool:
    """Whether a BufferedRef pads its cut blocks (`BufferedRefOp.padded`)."""
    owner = bref.owner
    return isinstance(owner, BufferedRefOp) and owner.padded is not None


def rounded(type: BufferedRefType) -> list[bool]:
    """Per dimension, whether Pallas rounds the block's DMA to the tiling
    (`_make_block_slice`): an `Element` or bounded dimension always, a
    blocked one where the array's end cuts its last block."""
    rounds = []
    for b, extent in zip(type.block_dims, type.get_shape(), strict=True):
        kind, size = b.kind.data, b.size.data
        rounds.append(b.at_element or (kind != SQUEEZED and extent % size != 0))
    return rounds


def tiles(type: BufferedRefType) -> tuple[int, ...]:
    """The tiling of the array a BufferedRef windows (`machine.tiling`)."""
    return tiling(type.get_shape(), type.array_type.dtype.itemsize)


def _rounded_span(type: BufferedRefType, dim: int, index):
    """The block at `index` in dimension `dim` (an integer or an array of
    them, each inside the array) as Pallas' DMA moves it: its start, where
    its data ends (at the array's end when cut) and where the DMA, rounded
    up to the tiling, ends."""
    block, extent = type.block_dims[dim], type.get_shape()[dim]
    start = block.start(index)
    end = start + np.minimum(block.size.data, extent - start)
    return start, end, start + align_to(end - start, tiles(type)[dim])


def past_end(type: BufferedRefType, dim: int, index):
    """Where the DMA of the block at `index` in dimension `dim`, rounded up
    to the tiling as Pallas rounds it, reaches past the array's end: a cut
    that is not a whole number of tiles. Pallas' interpret mode fails there
    (`buffer_bounds="logical"`); the hardware reads its layout's padding."""
    if type.block_dims[dim].kind.data == SQUEEZED or not rounded(type)[dim]:
        return index != index  # never: False, or an array of them
    return _rounded_span(type, dim, index)[2] > type.get_shape()[dim]


def past_end_error(name: str, type: BufferedRefType, dim: int, index: int) -> str:
    """The message for a block whose rounded DMA reaches past the end."""
    start, end, stop = _rounded_span(type, dim, index)
    return errors.CUT_BLOCK_PAST_END.format(
        bref=name,
        dim=dim,
        start=start,
        end=end,
        tile=tiles(type)[dim],
        stop=stop,
        extent=type.get_shape()[dim],
    )


def viewed_past_end(type: BufferedRefType, dim: int, index):
    """Where the block at `index` in dimension `dim` (an integer or an array
    of them, each inside the array) reaches past the array's end when it is
    viewed whole, as Pallas views an operand already in the window's space
    (`BufferedRef.compute_slice`: the block's full size, never cut)."""
    block, extent = type.block_dims[dim], type.get_shape()[dim]
    if block.kind.data == SQUEEZED:
        return index != index  # never: False, or an array of them
    return block.start(index) + block.window_extent > extent


def viewed_past_end_error(
    name: str, type: BufferedRefType, dim: int, index: int
) -> str:
    """The message for a viewed block that reaches past the end."""
    block = type.block_dims[dim]
    start = block.start(index)
    return errors.VIEWED_BLOCK_PAST_END.format(
        bref=name,
        start=start,
        stop=start + block.window_extent,
        dim=dim,
        extent=type.get_shape()[dim],
        space=type.space.data,
    )


def check_tiling(type: BufferedRefType) -> None:
    """A dimension whose DMA Pallas rounds to the tiling must have a block
    that is a whole number of tiles (`_create_blocked_slice` and
    `_create_bounded_slice`, verbatim). Pallas infers the tiling of every
    copied block of 2 or more dimensions, rounded or not, and has none for
    8-byte elements: its loop never ends there."""
    shape = type.get_shape()
    hangs = len(shape) > 1 and not lanes_packing(type.array_type.dtype.itemsize)
    if hangs and not type.is_trivial_windowing:  # `tpu_info._get_tiling_factor`
        raise CopyIRError(
            errors.NO_TILING_HANGS.format(itemsize=type.array_type.dtype.itemsize)
        )
    rounds = rounded(type)
    if not any(rounds):
        return
    for b, tile, rounds_here in zip(type.block_dims, tiles(type), rounds, strict=True):
        if rounds_here and b.window_extent % tile:
            raise CopyIRError(
                errors.BLOCK_TILING.format(block=b.window_extent, tiling=tile)
            )


def _block_text(block: Sequence[BlockDimAttr]) -> str:
    inner = ", ".join(b.describe() for b in block)
    return f"({inner},)" if len(block) == 1 else f"({inner})"


@irdl_op_definition
class BufferedCopyOp(CopyOp):
    """Copy between a plain ref and one window slot of a BufferedRef.

    `copy.buffered_copy %x -> %bx[7, 2] slot 0 : !copy.ref<...> -> !copy.buffered<...>`
    copies block (7, 2) of x into slot 0 of bx's window (copy-in); with the
    BufferedRef as the source it copies out. Block indices and the slot may
    be index values (`%bx[%i, 2] slot %s`). Without an action the copy is
    synchronous; `"start" ... sem %s` starts it on a semaphore the user
    gives and `"wait" ...` waits for it, so a prefetching loop can overlap
    windows (Pallas' `BufferedRef.copy_in` / `wait_in`). Block indices are
    written on the BufferedRef's side; the syntax accepts them on either
    side so that a copy with zero or two BufferedRefs reaches the verifier.
    """

    name = "copy.buffered_copy"

    src = operand_def(RefType | BufferedRefType)
    dst = operand_def(RefType | BufferedRefType)
    dynamic_indices = var_operand_def(IndexType)
    dynamic_slot = opt_operand_def(IndexType)
    sem = opt_operand_def(SemaphoreType)
    src_indices = opt_prop_def(DenseArrayBase[I64])
    dst_indices = opt_prop_def(DenseArrayBase[I64])
    slot = opt_prop_def(IntegerAttr[I64])
    action = opt_prop_def(ActionConstraint)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def written(self) -> tuple[SSAValue, ...]:
        return () if isinstance(self.dst.type, BufferedRefType) else (self.dst,)

    def __init__(
        self,
        src: SSAValue,
        dst: SSAValue,
        indices: Sequence[int | SSAValue] | None = None,
        *,
        slot: int | SSAValue = 0,
        action: str | None = None,
        sem: SSAValue | None = None,
    ):
        if action is not None:
            check_action(action)
        on_src = isinstance(src.type, BufferedRefType)
        static, dynamic = split_dynamic_index_list(indices or (), DYNAMIC)
        static = None if indices is None else static
        properties = self.index_properties(
            static if on_src else None,
            None if on_src else static,
            slot if isinstance(slot, int) else 0,
        )
        if action is not None:
            properties["action"] = action_attr(action)
        super().__init__(
            operands=[
                src,
                dst,
                dynamic,
                [slot] if isinstance(slot, SSAValue) else [],
                [sem] if sem is not None else [],
            ],
            properties=properties,
        )

    @staticmethod
    def index_properties(
        src_indices: Sequence[int] | None,
        dst_indices: Sequence[int] | None,
        slot: int,
    ) -> dict[str, Attribute]:
        properties: dict[str, Attribute] = {}
        if src_indices is not None:
            properties["src_indices"] = i64_array(tuple(src_indices))
        if dst_indices is not None:
            properties["dst_indices"] = i64_array(tuple(dst_indices))
        if slot:
            properties["slot"] = IntegerAttr(slot, i64)
        return properties

    @staticmethod
    def segments(indices: int, slot: bool, sem: bool) -> DenseArrayBase:
        """`operandSegmentSizes` for `create`: src, dst, the dynamic block
        indices, the dynamic slot and the semaphore."""
        return segment_sizes((1, 1, indices, int(slot), int(sem)))

    @property
    def copy_in(self) -> bool:
        """True when the BufferedRef is the destination."""
        return isinstance(self.dst.type, BufferedRefType)

    @property
    def bref(self) -> SSAValue:
        return self.dst if self.copy_in else self.src

    @property
    def plain(self) -> SSAValue:
        return self.src if self.copy_in else self.dst

    @property
    def slot_value(self) -> int | SSAValue:
        """The slot: an integer, or the index value it takes."""
        return slot_of(self.dynamic_slot, self.slot)

    @property
    def action_value(self) -> DmaAction | str | None:
        """`start` or `wait` for an asynchronous copy (the user's word if it
        is neither); None for a synchronous one."""
        if self.action is None:
            return None
        word = self.action.data
        return DmaAction(word) if word in ACTIONS else word

    @property
    def block_indices(self) -> tuple[Index | None, ...] | None:
        """The block indices: integers, or the index values they take (None
        where the operands run out, see `mixed`)."""
        attr = self.dst_indices if self.copy_in else self.src_indices
        if attr is None:
            return None
        return tuple(mixed(attr.get_values(), self.dynamic_indices))

    def _print_indices(self, printer: Printer, src: bool) -> None:
        """A side's block indices, if it has them; the source side's take
        the first dynamic values."""
        attr = self.src_indices if src else self.dst_indices
        if attr is None:
            return
        before = self.src_indices
        skip = 0 if src or before is None else before.get_values().count(DYNAMIC)
        print_index_list(printer, attr.get_values(), self.dynamic_indices[skip:])

    def check(self) -> None:
        if self.action is not None:
            check_action(self.action.data)
            if self.sem is None:
                action = self.action.data
                raise CopyIRError(errors.WINDOW_NO_SEMAPHORE.format(action=action))
            expect_semaphore(f"buffered_copy {self.action.data}", "sem", self.sem)
        elif self.sem is not None:
            raise CopyIRError(errors.SYNC_WINDOW_SEMAPHORE)
        src_is, dst_is = (
            isinstance(v.type, BufferedRefType) for v in (self.src, self.dst)
        )
        if src_is and dst_is:
            raise CopyIRError(errors.BOTH_BUFFERED)
        if not (src_is or dst_is):
            raise CopyIRError(errors.NEITHER_BUFFERED)
        bref, plain = self.bref, self.plain
        bref_name = describe(bref)
        type = cast(BufferedRefType, bref.type)
        plain_indices = self.src_indices if self.copy_in else self.dst_indices
        if plain_indices is not None:
            raise CopyIRError(
                errors.INDICES_ON_PLAIN_REF.format(bref=bref_name, name=describe(plain))
            )
        role = "src" if self.copy_in else "dst"
        plain_type = expect_ref("buffered_copy", role, plain)
        if (
            plain_type.get_shape() != type.get_shape()
            or plain_type.element_type != type.element_type
        ):
            raise CopyIRError(
                errors.WINDOWED_ARRAY_MISMATCH.format(
                    name=describe(plain),
                    type=plain_type.describe(),
                    bref=bref_name,
                    array=type.array_type.describe().removesuffix(" @hbm"),
                )
            )
        indices = self.block_indices
        if indices is None:
            if not type.is_trivial_windowing:
                raise CopyIRError(errors.MISSING_BLOCK_INDICES.format(bref=bref_name))
        else:
            if not all_given(indices):
                raise CopyIRError(
                    errors.MALFORMED_VIEW.format(
                        name=bref_name, why="its dynamic indices and operands disagree"
                    )
                )
            check_block_indices(bref_name, type, indices, is_padded(bref))
        check_slot(self.slot_value, bref)

    @classmethod
    def parse(cls, parser: Parser) -> BufferedCopyOp:
        action = parser.parse_optional_str_literal()
        dynamic: list[UnresolvedOperand] = []
        src = parser.parse_unresolved_operand()
        src_indices = parse_optional_index_list(parser, dynamic)
        parser.parse_punctuation("->")
        dst = parser.parse_unresolved_operand()
        dst_indices = parse_optional_index_list(parser, dynamic)
        slot, slot_operand = 0, None
        if parser.parse_optional_keyword("slot") is not None:
            slot, slot_operand = parse_slot(parser)
        sem = None
        if parser.parse_optional_keyword("sem") is not None:
            sem = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        src_type = parser.parse_type()
        parser.parse_punctuation("->")
        dst_type = parser.parse_type()
        sem_typed = None
        if sem is not None:
            parser.parse_punctuation(",")
            sem_typed = (sem, parser.parse_type())
        properties = cls.index_properties(src_indices, dst_indices, slot)
        if action is not None:
            properties["action"] = action_attr(action)
        properties["operandSegmentSizes"] = cls.segments(
            len(dynamic), slot_operand is not None, sem is not None
        )
        return cls.create(
            operands=[
                parser.resolve_operand(src, src_type),
                parser.resolve_operand(dst, dst_type),
                *resolve_indices(parser, dynamic),
                *resolve_indices(parser, [slot_operand] if slot_operand else []),
                *([parser.resolve_operand(*sem_typed)] if sem_typed else []),
            ],
            properties=properties,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        if self.action is not None:
            printer.print_string_literal(str(self.action.data))
            printer.print_string(" ")
        printer.print_operand(self.src)
        self._print_indices(printer, src=True)
        printer.print_string(" -> ")
        printer.print_operand(self.dst)
        self._print_indices(printer, src=False)
        if self.dynamic_slot is not None or self.slot is not None:
            printer.print_string(" slot ")
            print_slot(printer, self.slot_value)
        if self.sem is not None:
            printer.print_string(" sem ")
            printer.print_operand(self.sem)
        printer.print_string(" : ")
        printer.print_attribute(self.src.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.dst.type)
        if self.sem is not None:
            printer.print_string(", ")
            printer.print_attribute(self.sem.type)


def check_block_indices(
    bref_name: str,
    type: BufferedRefType,
    indices: Sequence[int | SSAValue],
    padded: bool,
) -> None:
    """Block indices against the grid: BLOCK_INDEX_COUNT and the bounds of
    the static ones (an index value is checked over its loops' domain),
    with, unless `padded`, their DMAs rounded up to the tiling
    (`past_end`)."""
    shape = type.get_shape()
    if len(indices) != len(shape):
        raise CopyIRError(
            errors.BLOCK_INDEX_COUNT.format(
                bref=bref_name, rank=len(shape), count=len(indices)
            )
        )
    expr = f"{bref_name}[{', '.join(index_text(i) for i in indices)}]"
    for dim, (index, b, extent) in enumerate(
        zip(indices, type.block_dims, shape, strict=False)
    ):
        if isinstance(index, SSAValue):
            continue
        if index < 0:
            raise CopyIRError(errors.NEGATIVE_INDEX.format(index=index, expr=expr))
        if b.at_element:
            if index >= extent:
                raise CopyIRError(
                    errors.ELEMENT_INDEX_OUT_OF_BOUNDS.format(
                        index=index, dim=dim, bref=bref_name, extent=extent
                    )
                )
        else:
            grid = b.count(extent)
            if index >= grid:
                raise CopyIRError(
                    errors.BLOCK_INDEX_OUT_OF_BOUNDS.format(
                        index=index, dim=dim, bref=bref_name, extent=grid
                    )
                )
        if not padded and past_end(type, dim, index):
            raise CopyIRError(past_end_error(bref_name, type, dim, index))


@irdl_op_definition
class WindowOp(CopyOp):
    """One slot of a BufferedRef's window as a ref: `%w = copy.window
    %bx[%slot] : !copy.buffered<...> -> !copy.ref<...>` (Pallas'
    `BufferedRef.current_ref`), the block shape without its squeezed
    dimensions, in the window's space."""

    name = "copy.window"

    bref = operand_def(BufferedRefType)
    dynamic_slot = opt_operand_def(IndexType)
    slot = opt_prop_def(IntegerAttr[I64])
    result = result_def(RefType)

    traits = traits_def(Pure())

    custom_directives = (Slot,)
    assembly_format = (
        "$bref `[` custom<Slot>($dynamic_slot, $slot) `]` attr-dict "
        "`:` type($bref) `->` type($result)"
    )

    def __init__(
        self, bref: SSAValue, slot: int | SSAValue = 0, name: str | None = None
    ):
        if not isinstance(bref.type, BufferedRefType):  # no slot type to give
            type = describe_type(bref.type)
            raise CopyIRError(
                errors.EXPECTED_BUFFERED_REF.format(
                    op="window", role="source", name=describe(bref), type=type
                )
            )
        static = isinstance(slot, int)
        super().__init__(
            operands=[bref, [] if static else [slot]],
            properties={"slot": IntegerAttr(slot, i64)} if static else {},
            result_types=[self.slot_type(bref.type)],
        )
        set_name(self.result, name)

    @property
    def slot_value(self) -> int | SSAValue:
        return slot_of(self.dynamic_slot, self.slot)

    @staticmethod
    def slot_type(bref: BufferedRefType) -> RefType:
        window = bref.window_type
        return ref_type(window.get_shape()[1:], window.element_type, window.space_name)

    def check(self) -> None:
        bref = cast(BufferedRefType, self.bref.type)
        check_slot(self.slot_value, self.bref)
        if self.result.type != self.slot_type(bref):
            raise CopyIRError(
                errors.MALFORMED_VIEW.format(
                    name=describe(self.bref),
                    why=f"its type should be {describe_type(self.slot_type(bref))}",
                )
            )
