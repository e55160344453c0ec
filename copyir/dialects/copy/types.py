"""The copy dialect's types and attributes: refs, semaphores, descriptors,
BufferedRefs and their block dimensions.

Each type spells itself two ways: its MLIR parameters (`parse_parameters`,
`print_parameters`) and, for messages, the authoring syntax (`describe`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import DYNAMIC_INDEX, ArrayAttr, IntAttr
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    TypeAttribute,
)
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.str_enum import StrEnum

from copyir import errors
from copyir.attributes import parse_i64
from copyir.dtypes import BY_IR, KNOWN_NAMES, DType
from copyir.errors import CopyIRError
from copyir.machine import MAX_RANK, memory_space

Subscript = tuple[int, int, bool]
"""One subscript of a view: (offset, size, dropped); an index is a dropped
subscript of size 1."""
DYNAMIC = DYNAMIC_INDEX
"""In a view's offsets (or an index list): this one is the next of the op's
dynamic operands, an index value computed from loop indices, as
`memref.subview` marks its dynamic offsets."""


def _int_array(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr(IntAttr(v) for v in values)


def _dims_text(shape: Sequence[int]) -> str:
    return ", ".join(str(d) for d in shape)


class MemorySpace(StrEnum):
    """Where a ref lives: HBM, or a core's VMEM or SMEM."""

    HBM = "hbm"
    VMEM = "vmem"
    SMEM = "smem"


@irdl_attr_definition
class MemorySpaceAttr(EnumAttribute[MemorySpace], SpacedOpaqueSyntaxAttribute):
    name = "copy.space"


def space_attr(name: str) -> MemorySpaceAttr:
    """The space a name means (`any` is `hbm`), or UNKNOWN_SPACE."""
    return MemorySpaceAttr(MemorySpace(memory_space(name)))


def _parse_space(parser: AttrParser) -> MemorySpaceAttr:
    """A memory space's name; an unknown one is a located parse error."""
    pos = parser.pos
    space = parser.parse_identifier(" for a memory space")
    try:
        return space_attr(space)
    except CopyIRError as err:
        parser.raise_error(str(err), pos, parser.pos)


def _print_shape_and_element(
    printer: Printer, shape: Sequence[int], element_type: Attribute
) -> None:
    for d in shape:
        printer.print_string(f"{d}x")
    printer.print_attribute(element_type)


class Shaped:
    """A type with a `shape` parameter of integers."""

    if TYPE_CHECKING:  # the parameter each type declares
        shape: ArrayAttr[IntAttr]

    def get_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)


@irdl_attr_definition
class RefType(Shaped, ParametrizedAttribute, TypeAttribute):
    """An array in one memory space: `!copy.ref<16x128xf32, hbm>`."""

    name = "copy.ref"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    space: MemorySpaceAttr

    def __init__(
        self, shape: Sequence[int], element_type: Attribute, space: str = "hbm"
    ):
        super().__init__(_int_array(shape), element_type, space_attr(space))

    def verify(self) -> None:
        if len(self.shape) > MAX_RANK:
            raise CopyIRError(
                errors.RANK_TOO_LARGE.format(limit=MAX_RANK, rank=len(self.shape))
            )
        if self.element_type not in BY_IR:
            raise CopyIRError(
                errors.UNKNOWN_DTYPE.format(dtype=self.element_type, known=KNOWN_NAMES)
            )
        if any(d.data < 1 for d in self.shape.data):
            raise CopyIRError(errors.BAD_DIMENSION.format(type=self.describe()))

    @property
    def dtype(self) -> DType:
        return BY_IR[self.element_type]

    @property
    def space_name(self) -> MemorySpace:
        return self.space.data

    @property
    def nbytes(self) -> int:
        size = self.dtype.itemsize
        for d in self.shape.data:
            size *= d.data
        return size

    def describe(self) -> str:
        """The type in the authoring syntax: `f32[16, 128] @hbm`."""
        dtype = BY_IR.get(self.element_type)
        name = dtype.name if dtype else str(self.element_type)
        return f"{name}[{_dims_text(self.get_shape())}] @{self.space.data}"

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            shape, element_type = parser.parse_ranked_shape()
            parser.parse_punctuation(",")
            space = _parse_space(parser)
        return [_int_array(shape), element_type, space]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            _print_shape_and_element(printer, self.get_shape(), self.element_type)
            printer.print_string(f", {self.space.data}")


@irdl_attr_definition
class SemaphoreType(ParametrizedAttribute, TypeAttribute):
    """One DMA semaphore, a counter in bytes: `!copy.sem`."""

    name = "copy.sem"

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        return []  # `!copy.sem` has none; anything after it is a syntax error

    def describe(self) -> str:
        return "a semaphore"


SEMAPHORE = SemaphoreType()


@irdl_attr_definition
class SemaphoreArrayType(Shaped, ParametrizedAttribute, TypeAttribute):
    """An array of DMA semaphores, indexed by integers: `!copy.sem_array<2>`."""

    name = "copy.sem_array"

    shape: ArrayAttr[IntAttr]

    def __init__(self, shape: Sequence[int]):
        super().__init__(_int_array(shape))

    def describe(self) -> str:
        return f"semaphore[{_dims_text(self.get_shape())}]"

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            shape = parser.parse_dimension_list()
        return [_int_array(shape)]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string("x".join(str(d) for d in self.get_shape()))


@irdl_attr_definition
class DescriptorType(ParametrizedAttribute, TypeAttribute):
    """A copy descriptor, `!copy.descriptor`: the (src, dst, sem) of
    `pltpu.make_async_copy`, as evaluated where it is made."""

    name = "copy.descriptor"

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        return []

    def describe(self) -> str:
        return "a copy descriptor"


DESCRIPTOR = DescriptorType()


class BlockKind(StrEnum):
    """How a block dimension indexes its array, as Pallas' `Blocked(b)`,
    `Element(b)`, `None` (squeezed) and `BoundedSlice(b)` do."""

    BLOCKED = "blocked"
    ELEMENT = "element"
    SQUEEZED = "squeezed"
    BOUNDED = "bounded"


BLOCKED, ELEMENT, SQUEEZED, BOUNDED = BlockKind
BLOCK_KINDS = tuple(BlockKind)


@irdl_attr_definition
class BlockKindAttr(EnumAttribute[BlockKind], SpacedOpaqueSyntaxAttribute):
    name = "copy.block_kind"


@irdl_attr_definition
class BlockDimAttr(ParametrizedAttribute):
    """One dimension of a block shape: `Blocked(b)`, `Element(b)`, squeezed,
    or `BoundedSlice(b)`.

    A squeezed dimension (Pallas' `None`) has block size 1 and is dropped
    from the window. A bounded one (`bounded 6 of 8`) copies `size`
    elements from an element offset into the first of its window's `bound`
    (a pipeline's index map gives `ds(start, size)` there); the rest of
    the window is padding.
    """

    name = "copy.block_dim"

    kind: BlockKindAttr
    size: IntAttr
    bound: IntAttr
    """A bounded dimension's window extent; 0 for the others."""

    def __init__(self, kind: BlockKind, size: int = 1, bound: int = 0):
        super().__init__(BlockKindAttr(BlockKind(kind)), IntAttr(size), IntAttr(bound))

    @property
    def at_element(self) -> bool:
        """Its block index is an element offset (`Element`, `BoundedSlice`)."""
        return self.kind.data in (ELEMENT, BOUNDED)

    @property
    def window_extent(self) -> int:
        """The window's extent along it (a kept dimension)."""
        return self.bound.data if self.kind.data == BOUNDED else self.size.data

    def start(self, index):
        """The element where the block at `index` (an integer or an array of
        them) starts: the index itself where it is an element offset (or a
        squeezed index), `index * size` for a blocked dimension."""
        return index * self.size.data if self.kind.data == BLOCKED else index

    def count(self, extent: int) -> int:
        """How many block indices an array dimension of `extent` has."""
        if self.kind.data == BLOCKED:
            return -(-extent // self.size.data)
        return extent

    def describe(self) -> str:
        kind, size = self.kind.data, self.size.data
        if kind == BOUNDED:
            return f"BoundedSlice({self.bound.data})"
        return {BLOCKED: f"{size}", ELEMENT: f"Element({size})"}.get(kind, "None")

    @classmethod
    def parse_block_dim(cls, parser: AttrParser) -> BlockDimAttr:
        if parser.parse_optional_keyword("squeezed"):
            return BlockDimAttr(SQUEEZED)
        if parser.parse_optional_keyword("bounded"):
            size = parse_i64(parser)
            parser.parse_keyword("of")
            return BlockDimAttr(BOUNDED, size, parse_i64(parser))
        kind = ELEMENT if parser.parse_optional_keyword("element") else BLOCKED
        return BlockDimAttr(kind, parse_i64(parser))

    def print_block_dim(self, printer: Printer) -> None:
        kind, size = self.kind.data, self.size.data
        if kind == BOUNDED:
            printer.print_string(f"bounded {size} of {self.bound.data}")
            return
        printer.print_string(
            {BLOCKED: f"{size}", ELEMENT: f"element {size}"}.get(kind, "squeezed")
        )


@irdl_attr_definition
class BufferedRefType(Shaped, ParametrizedAttribute, TypeAttribute):
    """A BufferedRef: `buffers` window slots over blocks of an array.

    `!copy.buffered<1000x384xf32, [128, 128], buffers 2, vmem>`: the array's
    shape and dtype, the block shape, the buffer count and the window space.
    The window itself has shape (buffers, *block without squeezed dims).
    """

    name = "copy.buffered"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    block: ArrayAttr[BlockDimAttr]
    buffers: IntAttr
    space: MemorySpaceAttr

    def __init__(
        self,
        shape: Sequence[int],
        element_type: Attribute,
        block: Sequence[BlockDimAttr],
        buffers: int = 2,
        space: str = "vmem",
    ):
        super().__init__(
            _int_array(shape),
            element_type,
            ArrayAttr(block),
            IntAttr(buffers),
            space_attr(space),
        )

    @property
    def array_type(self) -> RefType:
        """The type of the plain refs this BufferedRef windows (in HBM)."""
        return RefType(self.get_shape(), self.element_type, "hbm")

    @property
    def block_dims(self) -> tuple[BlockDimAttr, ...]:
        return self.block.data

    @property
    def is_trivial_windowing(self) -> bool:
        """Every block dimension is the whole array dimension."""
        return all(
            b.kind.data == BLOCKED and b.size.data == d
            for b, d in zip(self.block_dims, self.get_shape(), strict=False)
        ) and len(self.block_dims) == len(self.shape)

    @property
    def window_type(self) -> RefType:
        window = [b.window_extent for b in self.block_dims if b.kind.data != SQUEEZED]
        return RefType((self.buffers.data, *window), self.element_type, self.space.data)

    def describe(self) -> str:
        array = self.array_type.describe().removesuffix(" @hbm")
        block = ", ".join(b.describe() for b in self.block_dims)
        if len(self.block_dims) == 1:
            block += ","
        return f"a BufferedRef over {array} (block=({block}))"

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            shape, element_type = parser.parse_ranked_shape()
            parser.parse_punctuation(",")
            block = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: BlockDimAttr.parse_block_dim(parser)
            )
            parser.parse_punctuation(",")
            parser.parse_keyword("buffers")
            buffers = parse_i64(parser)
            parser.parse_punctuation(",")
            space = _parse_space(parser)
        return [
            _int_array(shape),
            element_type,
            ArrayAttr(block),
            IntAttr(buffers),
            space,
        ]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            _print_shape_and_element(printer, self.get_shape(), self.element_type)
            printer.print_string(", [")
            printer.print_list(self.block_dims, lambda b: b.print_block_dim(printer))
            printer.print_string(f"], buffers {self.buffers.data}, {self.space.data}")


@functools.lru_cache(maxsize=4096)
def ref_type(shape: tuple[int, ...], element_type: Attribute, space: str) -> RefType:
    """A RefType, shared: attributes are immutable, and building one costs
    more than looking it up (large programs repeat a few types)."""
    return RefType(shape, element_type, space)


def describe_type(type: Attribute) -> str:
    """A type as the authoring syntax and the messages spell it."""
    if isinstance(
        type,
        RefType | SemaphoreType | SemaphoreArrayType | BufferedRefType | DescriptorType,
    ):
        return type.describe()
    return str(type)
