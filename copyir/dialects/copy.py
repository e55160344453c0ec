"""The copy dialect: refs, semaphores, BufferedRefs and the DMAs between them.

Types first, then one class per op, then the `Copy` dialect at the bottom.
The ops follow the TPU copy helpers of JAX Pallas: `copy.dma` is
`make_async_copy(...).start()` / `.wait()`, `copy.sync_copy` is the pytree
`sync_copy` helper, and `copy.buffered_ref` / `copy.buffered_copy` are a
`BufferedRef` and its synchronous copy through one window slot.

Verifiers raise `CopyIRError` (a `ValueError`) with the messages of
`copyir.errors`; `passes.verify` gives them the op's location. A check that
looks through chains of views (do a DMA's ends overlap?) is a
`verify_accesses(accesses)` method rather than part of `verify_`:
`passes.verify` calls it with one `copyir.access.Accesses` for the whole
program, so that each view is folded once. Builders that
a user calls from Python check eagerly; the parsers build ops leniently
(`Op.create`) so that every semantic error comes from the verifier.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import (
    I64,
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    IntAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.ir.affine import AffineExpr
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, NoTerminator, SymbolOpInterface

from copyir import errors, pytree
from copyir.attributes import i64_array, int_values, segment_sizes
from copyir.dtypes import BY_IR, KNOWN_NAMES, DType
from copyir.errors import CopyIRError, Note
from copyir.index import constant_out_of_range, divides_by_zero
from copyir.locations import loc_of
from copyir.machine import (
    MAX_RANK,
    MAX_SEMAPHORES,
    memory_space,
)

if TYPE_CHECKING:
    from copyir.access import Accesses

ACTIONS = ("start", "wait")

Subscript = tuple[int, int, bool]
"""One subscript of a view: (offset, size, dropped); an index is a dropped
subscript of size 1."""
DYNAMIC = -(2**63)
"""In a view's offsets (or an index list): this one is the next of the op's
dynamic operands, an index value computed from loop indices, as
`memref.subview` marks its dynamic offsets."""


# --------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------


def _int_array(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr(IntAttr(v) for v in values)


def _dims_text(shape: Sequence[int]) -> str:
    return ", ".join(str(d) for d in shape)


@irdl_attr_definition
class RefType(ParametrizedAttribute, TypeAttribute):
    """An array in one memory space: `!copy.ref<16x128xf32, hbm>`."""

    name = "copy.ref"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    space: StringAttr

    def __init__(
        self, shape: Sequence[int], element_type: Attribute, space: str = "hbm"
    ):
        super().__init__(_int_array(shape), element_type, StringAttr(space))

    def verify(self) -> None:
        if len(self.shape) > MAX_RANK:
            raise CopyIRError(
                errors.RANK_TOO_LARGE.format(limit=MAX_RANK, rank=len(self.shape))
            )
        if self.element_type not in BY_IR:
            raise CopyIRError(
                errors.UNKNOWN_DTYPE.format(dtype=self.element_type, known=KNOWN_NAMES)
            )
        memory_space(self.space.data)
        if any(d.data < 1 for d in self.shape.data):
            raise CopyIRError(errors.BAD_DIMENSION.format(type=self.describe()))

    def get_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def dtype(self) -> DType:
        return BY_IR[self.element_type]

    @property
    def space_name(self) -> str:
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
            pos = parser.pos
            space = parser.parse_identifier("for a memory space")
            try:
                space = memory_space(space)
            except CopyIRError as err:
                parser.raise_error(str(err), pos, parser.pos)
        return [_int_array(shape), element_type, StringAttr(space)]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            for d in self.get_shape():
                printer.print_string(f"{d}x")
            printer.print_attribute(self.element_type)
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
class SemaphoreArrayType(ParametrizedAttribute, TypeAttribute):
    """An array of DMA semaphores, indexed by integers: `!copy.sem_array<2>`."""

    name = "copy.sem_array"

    shape: ArrayAttr[IntAttr]

    def __init__(self, shape: Sequence[int]):
        super().__init__(_int_array(shape))

    def get_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

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


BLOCKED, ELEMENT, SQUEEZED = "blocked", "element", "squeezed"
BLOCK_KINDS = (BLOCKED, ELEMENT, SQUEEZED)


@irdl_attr_definition
class BlockDimAttr(ParametrizedAttribute):
    """One dimension of a block shape: `Blocked(b)`, `Element(b)` or squeezed.

    A squeezed dimension (Pallas' `None`) has block size 1 and is dropped
    from the window.
    """

    name = "copy.block_dim"

    kind: StringAttr
    size: IntAttr

    def __init__(self, kind: str, size: int = 1):
        super().__init__(StringAttr(kind), IntAttr(size))

    def describe(self) -> str:
        kind, size = self.kind.data, self.size.data
        return {BLOCKED: f"{size}", ELEMENT: f"Element({size})"}.get(kind, "None")

    @classmethod
    def parse_block_dim(cls, parser: AttrParser) -> BlockDimAttr:
        if parser.parse_optional_keyword("squeezed"):
            return BlockDimAttr(SQUEEZED)
        kind = ELEMENT if parser.parse_optional_keyword("element") else BLOCKED
        return BlockDimAttr(kind, _parse_i64(parser))

    def print_block_dim(self, printer: Printer) -> None:
        kind, size = self.kind.data, self.size.data
        printer.print_string(
            {BLOCKED: f"{size}", ELEMENT: f"element {size}"}.get(kind, "squeezed")
        )


@irdl_attr_definition
class BufferedRefType(ParametrizedAttribute, TypeAttribute):
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
    space: StringAttr

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
            StringAttr(space),
        )

    def get_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

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
        window = [b.size.data for b in self.block_dims if b.kind.data != SQUEEZED]
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
            buffers = _parse_i64(parser)
            parser.parse_punctuation(",")
            pos = parser.pos
            space = parser.parse_identifier("for a memory space")
            try:
                space = memory_space(space)
            except CopyIRError as err:
                parser.raise_error(str(err), pos, parser.pos)
        return [
            _int_array(shape),
            element_type,
            ArrayAttr(block),
            IntAttr(buffers),
            StringAttr(space),
        ]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            for d in self.get_shape():
                printer.print_string(f"{d}x")
            printer.print_attribute(self.element_type)
            printer.print_string(", [")
            printer.print_list(self.block_dims, lambda b: b.print_block_dim(printer))
            printer.print_string(f"], buffers {self.buffers.data}, {self.space.data}")


def set_name(value: SSAValue, name: str | None) -> None:
    """Name a value exactly as the user did.

    xDSL's `name_hint` setter drops a trailing `_<digits>`, which would turn
    a parameter `out_1` into `out`; parameter names bind inputs and outputs,
    so copyir keeps them whole.
    """
    value._name = name


def describe_type(type: Attribute) -> str:
    """A type as the authoring syntax and the messages spell it."""
    if isinstance(
        type,
        RefType | SemaphoreType | SemaphoreArrayType | BufferedRefType | DescriptorType,
    ):
        return type.describe()
    return str(type)


def describe(value: SSAValue) -> str:
    """A value as a user wrote it: its name, the view expression, or the
    index expression (`8 * i + 8`)."""
    suffixes = []
    while value.name_hint is None and isinstance(value.owner, ViewOp | SemIndexOp):
        suffixes.append(value.owner.subscripts_text())
        value = value.owner.source
    if value.name_hint is None and isinstance(value.owner, IndexOp):
        return value.owner.expression_text() + "".join(reversed(suffixes))
    return (value.name_hint or "an unnamed value") + "".join(reversed(suffixes))


# --------------------------------------------------------------------------
# Shared checks
# --------------------------------------------------------------------------


def expect_ref(op: str, role: str, value: SSAValue) -> RefType:
    """The value's RefType, or EXPECTED_REF naming what it is instead."""
    if isinstance(value.type, RefType):
        return value.type
    raise CopyIRError(
        errors.EXPECTED_REF.format(
            op=op, role=role, name=describe(value), type=describe_type(value.type)
        )
    )


def expect_semaphore(op: str, role: str, value: SSAValue) -> None:
    if isinstance(value.type, SemaphoreType):
        return
    template = (
        errors.UNINDEXED_SEMAPHORE_ARRAY
        if isinstance(value.type, SemaphoreArrayType)
        else errors.EXPECTED_SEMAPHORE
    )
    raise CopyIRError(
        template.format(
            op=op, role=role, name=describe(value), type=describe_type(value.type)
        )
    )


def check_dma_types(src: RefType, dst: RefType) -> None:
    """Mosaic's checks, messages verbatim: dtype first, then shape."""
    if src.element_type != dst.element_type:
        raise CopyIRError(errors.DTYPE_MISMATCH)
    if src.get_shape() != dst.get_shape():
        raise CopyIRError(errors.SHAPE_MISMATCH)


def types_note(src: SSAValue, dst: SSAValue) -> str:
    """A note naming both ends of a copy with their types."""
    return errors.TYPES_NOTE.format(
        src=describe(src),
        src_type=describe_type(src.type),
        dst=describe(dst),
        dst_type=describe_type(dst.type),
    )


def _same_ref_type(src: Attribute, dst: Attribute) -> bool:
    """Both refs, of one dtype and shape: what a DMA's two ends need."""
    return (
        isinstance(src, RefType)
        and isinstance(dst, RefType)
        and src.element_type == dst.element_type
        and src.shape == dst.shape
    )


def check_no_overlap(src: SSAValue, dst: SSAValue, accesses: Accesses) -> None:
    if accesses.overlap(src, dst):
        raise CopyIRError(
            errors.DMA_OVERLAP.format(src=describe(src), dst=describe(dst))
        )


# --------------------------------------------------------------------------
# Ops
# --------------------------------------------------------------------------

BUILT: weakref.WeakSet = weakref.WeakSet()
"""Modules whose ops copyir's builder made (the authoring syntax's parser):
their operands, results and properties are well-formed by construction, so
the verifier runs only each op's own `check`, not xDSL's generic one."""


class CopyOp(IRDLOperation):
    """An op of the copy dialect. `check` holds its own rules; `verify_`,
    which xDSL's verify calls after its generic checks of the op's shape
    (operand, result and property kinds), runs it."""

    def check(self) -> None:
        pass

    def verify_(self) -> None:
        self.check()

    def written(self) -> tuple[SSAValue, ...]:
        """The refs this op writes (or names as a DMA's destination)."""
        return ()


@irdl_op_definition
class KernelOp(CopyOp):
    """A kernel: HBM ref parameters and a body of copy ops.

    `copy.kernel @name(%a : !copy.ref<16x128xf32, hbm>) { ... }`. Parameter
    names are the entry block's argument names.
    """

    name = "copy.kernel"

    sym_name = prop_def(StringAttr)
    body = region_def("single_block")

    traits = traits_def(NoTerminator(), IsolatedFromAbove(), SymbolOpInterface())

    def __init__(
        self, name: str, params: Sequence[tuple[str, Attribute]] = (), body=None
    ):
        block = Block(arg_types=[t for _, t in params])
        for arg, (param_name, _) in zip(block.args, params, strict=True):
            set_name(arg, param_name)
        super().__init__(
            properties={"sym_name": StringAttr(name)},
            regions=[body if body is not None else Region(block)],
        )

    @property
    def kernel_name(self) -> str:
        return self.sym_name.data

    @property
    def params(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args)

    @property
    def param_names(self) -> list[str]:
        """Each parameter's name; `argN` for one the IR left unnamed."""
        return [a.name_hint or f"arg{i}" for i, a in enumerate(self.params)]

    def check(self) -> None:
        seen = set()
        for arg, name in zip(self.params, self.param_names, strict=True):
            try:
                if name in seen:
                    raise CopyIRError(errors.DUPLICATE_PARAM.format(name=name))
                seen.add(name)
                type = expect_ref("kernel", "parameter", arg)
                if type.space_name != "hbm":
                    raise CopyIRError(
                        errors.PARAM_NOT_HBM.format(name=name, type=type.describe())
                    )
            except CopyIRError as err:
                raise err.at(loc_of(arg.location)) from None

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data

        def parse_param() -> Parser.Argument:
            arg = parser.parse_argument()
            location = parser.parse_optional_location()
            if location is not None and loc_of(location) is not None:
                arg.location = location
            return arg

        args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parse_param)
        attributes = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region(args)
        kernel = cls.build(properties={"sym_name": StringAttr(name)}, regions=[region])
        if attributes is not None:
            kernel.attributes |= attributes.data
        return kernel

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string("(")
        printer.print_list(self.body.block.args, printer.print_block_argument)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(
            self.body, print_entry_block_args=False, print_empty_block=False
        )


@irdl_op_definition
class AllocOp(CopyOp):
    """Scratch memory in VMEM or SMEM: `%buf = copy.alloc : !copy.ref<...>`."""

    name = "copy.alloc"

    result = result_def()

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, type: RefType, name: str | None = None):
        super().__init__(result_types=[type])
        set_name(self.result, name)

    def check(self) -> None:
        type = expect_ref("alloc", "result", self.result)
        if type.space_name == "hbm":
            raise CopyIRError(
                errors.ALLOC_IN_HBM.format(
                    name=describe(self.result), type=type.describe()
                )
            )


@irdl_op_definition
class SemaphoreOp(CopyOp):
    """A DMA semaphore, or an array of them: `%s = copy.semaphore : !copy.sem`."""

    name = "copy.semaphore"

    result = result_def(SemaphoreType | SemaphoreArrayType)

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, shape: Sequence[int] = (), name: str | None = None):
        type = SemaphoreArrayType(shape) if shape else SemaphoreType()
        super().__init__(result_types=[type])
        set_name(self.result, name)

    def check(self) -> None:
        type = self.result.type
        if not isinstance(type, SemaphoreArrayType):
            return
        shape = type.get_shape()
        if not shape or any(d < 1 for d in shape):
            raise CopyIRError(errors.BAD_SEMAPHORE_SHAPE.format(shape=list(shape)))
        count = 1
        for extent in shape:
            count *= extent
        if count > MAX_SEMAPHORES:
            raise CopyIRError(
                errors.TOO_MANY_SEMAPHORES.format(
                    count=count, name=describe(self.result), limit=MAX_SEMAPHORES
                )
            )


def _subscript_text(offset: int | SSAValue, size: int, dropped: bool) -> str:
    if isinstance(offset, SSAValue):
        name = describe(offset)
        return name if dropped else f"ds({name}, {size})"
    return str(offset) if dropped else f"{offset}:{offset + size}"


def view_result_type(source: Attribute, subscripts: Sequence[Subscript]) -> Attribute:
    """The type of a view; a well-formed placeholder when the view is not.

    Parsers build views before verifying them, so an invalid view gets the
    source's type and the verifier reports the view itself.
    """
    if not isinstance(source, RefType) or len(subscripts) > len(source.shape):
        return source
    shape = list(source.get_shape())
    kept = [size for _, size, dropped in subscripts if not dropped]
    new_shape = kept + shape[len(subscripts) :]
    if any(d < 1 for d in new_shape):
        return source
    return ref_type(tuple(new_shape), source.element_type, source.space_name)


@functools.lru_cache(maxsize=4096)
def ref_type(shape: tuple[int, ...], element_type: Attribute, space: str) -> RefType:
    """A RefType, shared: attributes are immutable, and building one costs
    more than looking it up (large programs repeat a few types)."""
    return RefType(shape, element_type, space)


@irdl_op_definition
class ViewOp(CopyOp):
    """A view of a ref: unit-step slices and integer indices per dimension.

    `%v = copy.view %x[0:32, 5] : !copy.ref<64x8x128xf32, hbm>` views rows
    0:32, drops dimension 1 at index 5, and keeps all of dimension 2. Views
    alias their source. Each subscript is (offset, size, dropped); an index
    is a dropped subscript of size 1. Starts are static now; loop-index
    starts will join as a variadic operand with a sentinel in `offsets`, the
    way `memref.subview` mixes static and dynamic offsets.
    """

    name = "copy.view"

    source = operand_def()
    dynamic_offsets = var_operand_def(IndexType)
    offsets = prop_def(DenseArrayBase[I64])
    sizes = prop_def(DenseArrayBase[I64])
    dropped = prop_def(DenseArrayBase[I64])
    result = result_def()

    def __init__(
        self,
        source: SSAValue,
        subscripts: Sequence[Subscript],
        name: str | None = None,
        dynamic: Sequence[SSAValue] = (),
    ):
        super().__init__(
            operands=[source, dynamic],
            properties=self.subscript_properties(subscripts),
            result_types=[view_result_type(source.type, subscripts)],
        )
        set_name(self.result, name)

    def starts(self) -> list[int | SSAValue]:
        """Each subscript's start: an integer, or the index value it takes."""
        offsets = int_values(self.offsets)
        if DYNAMIC not in offsets:  # most views: no operands to look up
            return list(offsets)
        dynamic = iter(self.dynamic_offsets)
        return [next(dynamic, None) if o == DYNAMIC else o for o in offsets]

    @staticmethod
    def subscript_properties(
        subscripts: Sequence[Subscript],
    ) -> dict[str, Attribute]:
        return {
            "offsets": i64_array(tuple(o for o, _, _ in subscripts)),
            "sizes": i64_array(tuple(s for _, s, _ in subscripts)),
            "dropped": i64_array(
                tuple(i for i, (_, _, d) in enumerate(subscripts) if d)
            ),
        }

    def subscripts(self) -> list[Subscript]:
        offsets, sizes, dropped = self.offsets, self.sizes, self.dropped
        cached = self.__dict__.get("_subscripts")
        if (
            cached is not None
            and cached[0] is offsets
            and cached[1] is sizes
            and cached[2] is dropped
        ):
            return cached[3]  # decoded once per op: verify and lowering ask often
        indexed = set(int_values(dropped))
        decoded = [
            (o, s, i in indexed)
            for i, (o, s) in enumerate(
                zip(int_values(offsets), int_values(sizes), strict=False)
            )
        ]
        self.__dict__["_subscripts"] = (offsets, sizes, dropped, decoded)
        return decoded

    def subscripts_text(self) -> str:
        return f"[{', '.join(self._subscript_texts())}]"

    def _subscript_texts(self) -> list[str]:
        return [
            _subscript_text(start, size, dropped)
            for start, (_, size, dropped) in zip(
                self.starts(), self.subscripts(), strict=True
            )
        ]

    def expression(self) -> str:
        return describe(self.source) + self.subscripts_text()

    def check(self) -> None:
        source = expect_ref("a view", "source", self.source)
        offsets, sizes = int_values(self.offsets), int_values(self.sizes)
        if offsets.count(DYNAMIC) != len(self.dynamic_offsets):
            raise CopyIRError(
                errors.MALFORMED_VIEW.format(
                    name=describe(self.source),
                    why="its dynamic offsets and operands disagree",
                )
            )
        if len(offsets) != len(sizes) or any(
            not 0 <= d < len(offsets) for d in int_values(self.dropped)
        ):
            raise CopyIRError(
                errors.MALFORMED_VIEW.format(
                    name=describe(self.source),
                    why="offsets, sizes and dropped disagree",
                )
            )
        shape = source.get_shape()
        if len(offsets) > len(shape):
            raise CopyIRError(
                errors.TOO_MANY_INDICES.format(
                    name=describe(self.source), rank=len(shape), count=len(offsets)
                )
            )
        dropped = int_values(self.dropped)
        kept = []
        for dim, (offset, size) in enumerate(zip(offsets, sizes, strict=True)):
            extent, indexed = shape[dim], dim in dropped
            if indexed and size != 1:
                raise CopyIRError(
                    errors.MALFORMED_VIEW.format(
                        name=describe(self.source),
                        why="an indexed dimension must have size 1",
                    )
                )
            if offset == DYNAMIC:  # checked over the loops' domain
                if size < 1 or size > extent:
                    _subscript_error(self, dim, extent, 0, size, indexed)
            elif offset < 0 or size < 1 or offset + size > extent:
                _subscript_error(self, dim, extent, offset, size, indexed)
            if not indexed:
                kept.append(size)
        result = self.result.type
        if not (
            isinstance(result, RefType)
            and result.get_shape() == (*kept, *shape[len(offsets) :])
            and result.element_type == source.element_type
            and result.space == source.space
        ):
            expected = view_result_type(source, self.subscripts())
            raise CopyIRError(
                errors.MALFORMED_VIEW.format(
                    name=describe(self.source),
                    why=f"its type should be {describe_type(expected)}",
                )
            )

    @classmethod
    def parse(cls, parser: Parser) -> ViewOp:
        source = parser.parse_unresolved_operand()
        dynamic: list[UnresolvedOperand] = []
        subscripts = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: _parse_subscript(parser, dynamic)
        )
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        return cls.build(
            operands=[
                parser.resolve_operand(source, source_type),
                [parser.resolve_operand(d, IndexType()) for d in dynamic],
            ],
            properties=cls.subscript_properties(subscripts),
            result_types=[view_result_type(source_type, subscripts)],
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string("[")
        for k, (start, (_, size, dropped)) in enumerate(
            zip(self.starts(), self.subscripts(), strict=True)
        ):
            if k:
                printer.print_string(", ")
            if isinstance(start, SSAValue):
                if dropped:
                    printer.print_operand(start)
                else:
                    printer.print_string("ds(")
                    printer.print_operand(start)
                    printer.print_string(f", {size})")
            else:
                printer.print_string(_subscript_text(start, size, dropped))
        printer.print_string("] : ")
        printer.print_attribute(self.source.type)


def _subscript_error(
    op: ViewOp | SemIndexOp,
    dim: int,
    extent: int,
    offset: int,
    size: int,
    dropped: bool,
) -> None:
    """Raise the error of a subscript that is known to be out of range."""
    _check_subscript(
        describe(op.source), op.expression(), dim, extent, offset, size, dropped
    )


def _check_subscript(
    name: str, expr: str, dim: int, extent: int, offset: int, size: int, dropped: bool
) -> None:
    if offset < 0:
        raise CopyIRError(errors.NEGATIVE_INDEX.format(index=offset, expr=expr))
    if dropped:
        if offset >= extent:
            raise CopyIRError(
                errors.INDEX_OUT_OF_BOUNDS.format(
                    index=offset, dim=dim, name=name, size=extent
                )
            )
        return
    if size < 1:
        raise CopyIRError(
            errors.EMPTY_SLICE.format(
                start=offset, stop=offset + size, dim=dim, expr=expr
            )
        )
    if offset + size > extent:
        raise CopyIRError(
            errors.SLICE_OUT_OF_BOUNDS.format(
                start=offset, stop=offset + size, dim=dim, name=name, size=extent
            )
        )


def _parse_i64(parser: AttrParser) -> int:
    """An integer that fits in 64 bits, as every integer property must."""
    start = parser.pos
    value = parser.parse_integer(allow_negative=True)
    if not -(2**63) <= value < 2**63:
        parser.raise_error(errors.INT_RANGE.format(value=value), start, parser.pos)
    return value


def _parse_subscript(
    parser: Parser, dynamic: list[UnresolvedOperand] | None = None
) -> Subscript:
    """`5` (an index), `0:32` (a slice), `%i` or `ds(%o, 8)` (a dynamic index
    or slice) in the MLIR form of a view; dynamic ones join `dynamic`."""
    if dynamic is not None:
        operand = parser.parse_optional_unresolved_operand()
        if operand is not None:
            dynamic.append(operand)
            return (DYNAMIC, 1, True)
        if parser.parse_optional_keyword("ds") is not None:
            parser.parse_punctuation("(")
            dynamic.append(parser.parse_unresolved_operand())
            parser.parse_punctuation(",")
            size = _parse_i64(parser)
            parser.parse_punctuation(")")
            return (DYNAMIC, size, False)
    start = _parse_i64(parser)
    if parser.parse_optional_punctuation(":") is None:
        return (start, 1, True)
    stop = _parse_i64(parser)
    if parser.parse_optional_punctuation(":") is not None:
        parser.raise_error(errors.SLICE_STEP.format(expr=f"{start}:{stop}:..."))
    return (start, stop - start, False)


@irdl_op_definition
class SemIndexOp(CopyOp):
    """One semaphore of an array: `%s = copy.sem_index %sems[1] : !copy.sem_array<2>`.

    Indexing fewer dimensions than the array has gives a smaller array.
    """

    name = "copy.sem_index"

    source = operand_def()
    dynamic_indices = var_operand_def(IndexType)
    indices = prop_def(DenseArrayBase[I64])
    result = result_def()

    def __init__(
        self,
        source: SSAValue,
        indices: Sequence[int],
        dynamic: Sequence[SSAValue] = (),
    ):
        super().__init__(
            operands=[source, dynamic],
            properties={"indices": i64_array(tuple(indices))},
            result_types=[sem_index_result_type(source.type, len(indices))],
        )

    def subscripts(self) -> list[Subscript]:
        """The indices as a view's subscripts, each dropping its dimension."""
        return [(i, 1, True) for i in int_values(self.indices)]

    def starts(self) -> list[int | SSAValue]:
        """Each index: an integer, or the index value it takes."""
        indices = int_values(self.indices)
        if DYNAMIC not in indices:
            return list(indices)
        dynamic = iter(self.dynamic_indices)
        return [next(dynamic, None) if i == DYNAMIC else i for i in indices]

    def subscripts_text(self) -> str:
        return f"[{', '.join(_subscript_text(i, 1, True) for i in self.starts())}]"

    def expression(self) -> str:
        return describe(self.source) + self.subscripts_text()

    def check(self) -> None:
        indices = self.indices.get_values()
        type = self.source.type
        shape = type.get_shape() if isinstance(type, SemaphoreArrayType) else ()
        if len(indices) > len(shape):
            raise CopyIRError(
                errors.TOO_MANY_INDICES.format(
                    name=describe(self.source), rank=len(shape), count=len(indices)
                )
            )
        if list(indices).count(DYNAMIC) != len(self.dynamic_indices):
            raise CopyIRError(
                errors.MALFORMED_VIEW.format(
                    name=describe(self.source),
                    why="its dynamic indices and operands disagree",
                )
            )
        for dim, index in enumerate(indices):
            if index != DYNAMIC and not 0 <= index < shape[dim]:
                _subscript_error(self, dim, shape[dim], index, 1, True)
        expected = sem_index_result_type(type, len(indices))
        if self.result.type != expected:
            raise CopyIRError(
                errors.MALFORMED_VIEW.format(
                    name=describe(self.source),
                    why=f"its type should be {describe_type(expected)}",
                )
            )

    @classmethod
    def parse(cls, parser: Parser) -> SemIndexOp:
        source = parser.parse_unresolved_operand()
        dynamic: list[UnresolvedOperand] = []

        def index() -> int:
            operand = parser.parse_optional_unresolved_operand()
            if operand is None:
                return _parse_i64(parser)
            dynamic.append(operand)
            return DYNAMIC

        indices = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, index)
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        return cls.build(
            operands=[
                parser.resolve_operand(source, source_type),
                [parser.resolve_operand(d, IndexType()) for d in dynamic],
            ],
            properties={"indices": i64_array(tuple(indices))},
            result_types=[sem_index_result_type(source_type, len(indices))],
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string("[")
        printer.print_list(
            self.starts(),
            lambda i: (
                printer.print_operand(i)
                if isinstance(i, SSAValue)
                else printer.print_string(str(i))
            ),
        )
        printer.print_string("] : ")
        printer.print_attribute(self.source.type)


def sem_index_result_type(source: Attribute, count: int) -> Attribute:
    if not isinstance(source, SemaphoreArrayType) or count >= len(source.shape):
        return SEMAPHORE
    return SemaphoreArrayType(source.get_shape()[count:])


@irdl_op_definition
class DmaOp(CopyOp):
    """Start a DMA, or wait for one: `make_async_copy(src, dst, sem)`.

    `copy.dma "start" %src, %dst, %sem add priority 1 : ...`. A start moves
    src into dst (adding when `add` is set) and raises sem by the bytes of
    the copy when it completes; a wait names the same descriptor and lowers
    sem by that many bytes once they have arrived. The action is a string,
    exactly `start` or `wait`, as in Pallas' `_copy_start_or_wait`.
    """

    name = "copy.dma"

    action = prop_def(StringAttr)
    src = operand_def()
    dst = operand_def()
    sem = operand_def()
    add = opt_prop_def(UnitAttr)
    priority = opt_prop_def(IntegerAttr[I64])

    assembly_format = (
        "$action $src `,` $dst `,` $sem (`add` $add^)? (`priority` $priority^)? "
        "attr-dict `:` type($src) `,` type($dst) `,` type($sem)"
    )

    def written(self) -> tuple[SSAValue, ...]:
        return (self.dst,)

    def __init__(
        self,
        action: str,
        src: SSAValue,
        dst: SSAValue,
        sem: SSAValue,
        *,
        add: bool = False,
        priority: int = 0,
    ):
        check_action(action)
        super().__init__(
            operands=[src, dst, sem],
            properties=self.option_properties(action, add, priority),
        )

    @staticmethod
    def option_properties(action: str, add: bool, priority: int) -> dict:
        properties: dict[str, Attribute] = {"action": StringAttr(action)}
        if add:
            properties["add"] = UnitAttr()
        if priority:
            properties["priority"] = IntegerAttr(priority, i64)
        return properties

    @property
    def is_start(self) -> bool:
        return self.action.data == "start"

    @property
    def priority_value(self) -> int:
        return self.priority.value.data if self.priority is not None else 0

    @property
    def label(self) -> str:
        return "copy_start" if self.is_start else "copy_wait"

    def check(self) -> None:
        check_action(self.action.data)
        src = expect_ref(self.label, "src", self.src)
        dst = expect_ref(self.label, "dst", self.dst)
        expect_semaphore(self.label, "sem", self.sem)
        if not self.is_start:
            for option, given in (
                ("add", self.add is not None),
                ("priority", self.priority is not None),
            ):
                if given:
                    raise CopyIRError(errors.WAIT_OPTIONS.format(option=option))
        if self.priority_value not in (0, 1):
            raise CopyIRError(errors.BAD_PRIORITY.format(priority=self.priority_value))
        try:
            check_dma_types(src, dst)
        except CopyIRError as err:
            note = Note(types_note(self.src, self.dst))
            raise CopyIRError(err.message, notes=(note,)) from None

    def verify_accesses(self, accesses: Accesses) -> None:
        """A start's source and destination must not overlap. A wait names
        its descriptor for the byte count only and moves nothing."""
        if self.is_start:
            check_no_overlap(self.src, self.dst, accesses)


def check_action(action: str) -> None:
    if action not in ACTIONS:
        raise CopyIRError(errors.UNKNOWN_ACTION.format(action=action))


@irdl_op_definition
class SyncCopyOp(CopyOp):
    """Synchronously copy a pytree of refs into another, leaf by leaf.

    `copy.sync_copy (%a, %b) -> {x: %va, y: %vb} add : !t0, !t1 -> !t2, !t3`.
    The operands are the leaves in JAX's leaf order; `src_tree` and
    `dst_tree` hold the two structures as spec strings.
    """

    name = "copy.sync_copy"

    srcs = var_operand_def()
    dsts = var_operand_def()
    src_tree = prop_def(StringAttr)
    dst_tree = prop_def(StringAttr)
    add = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def written(self) -> tuple[SSAValue, ...]:
        return tuple(self.dsts)

    def __init__(
        self,
        src_tree: pytree.TreeDef,
        srcs: Sequence[SSAValue],
        dst_tree: pytree.TreeDef,
        dsts: Sequence[SSAValue],
        *,
        add: bool = False,
    ):
        super().__init__(
            operands=[srcs, dsts],
            properties=self.tree_properties(src_tree, dst_tree, add),
        )

    @staticmethod
    def tree_properties(
        src_tree: pytree.TreeDef, dst_tree: pytree.TreeDef, add: bool
    ) -> dict[str, Attribute]:
        properties: dict[str, Attribute] = {
            "src_tree": StringAttr(src_tree.spec),
            "dst_tree": StringAttr(dst_tree.spec),
        }
        if add:
            properties["add"] = UnitAttr()
        return properties

    def trees(self) -> tuple[pytree.TreeDef, pytree.TreeDef]:
        return (
            pytree.parse_spec(self.src_tree.data),
            pytree.parse_spec(self.dst_tree.data),
        )

    def check(self) -> None:
        src_tree, dst_tree = self.trees()
        for tree, values in ((src_tree, self.srcs), (dst_tree, self.dsts)):
            if tree.num_leaves != len(values):
                raise CopyIRError(
                    errors.TREE_LEAF_COUNT.format(
                        spec=tree.spec, leaves=tree.num_leaves, count=len(values)
                    )
                )
        if src_tree != dst_tree:
            raise CopyIRError(
                errors.TREE_MISMATCH.format(
                    src=src_tree.render([describe(v) for v in self.srcs]),
                    dst=dst_tree.render([describe(v) for v in self.dsts]),
                )
            )
        leaves = zip(self.srcs, self.dsts, strict=True)
        if not all(_same_ref_type(src.type, dst.type) for src, dst in leaves):
            self._check_leaves(src_tree)

    def verify_accesses(self, accesses: Accesses) -> None:
        """No leaf's source and destination overlap."""
        leaves = zip(self.srcs, self.dsts, strict=True)
        if any(accesses.overlap(src, dst) for src, dst in leaves):
            self._check_leaves(self.trees()[0], accesses)

    def _check_leaves(
        self, tree: pytree.TreeDef, accesses: Accesses | None = None
    ) -> None:
        """Each leaf's checks in leaf order (with `accesses`, the overlap
        too), so that the first error names its leaf."""
        for path, src, dst in zip(tree.leaf_paths(), self.srcs, self.dsts, strict=True):
            role = f"leaf {path}" if path else "leaf"
            src_type = expect_ref("sync_copy", f"source {role}", src)
            dst_type = expect_ref("sync_copy", f"destination {role}", dst)
            try:
                check_dma_types(src_type, dst_type)
                if accesses is not None:
                    check_no_overlap(src, dst, accesses)
            except CopyIRError as err:
                note = Note(f"at {role}: {types_note(src, dst)}")
                raise CopyIRError(err.message, notes=(note,)) from None

    @classmethod
    def parse(cls, parser: Parser) -> SyncCopyOp:
        src_spec, srcs = _parse_tree_side(parser)
        parser.parse_punctuation("->")
        dst_spec, dsts = _parse_tree_side(parser)
        add = parser.parse_optional_keyword("add") is not None
        parser.parse_punctuation(":")
        pos = parser.pos
        src_types = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_type
        )
        parser.parse_punctuation("->")
        dst_types = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_type
        )
        if len(src_types) != len(srcs) or len(dst_types) != len(dsts):
            parser.raise_error("sync_copy needs one type per leaf", pos, parser.pos)
        properties: dict[str, Attribute] = {
            "src_tree": StringAttr(src_spec),
            "dst_tree": StringAttr(dst_spec),
        }
        if add:
            properties["add"] = UnitAttr()
        return cls.build(
            operands=[
                parser.resolve_operands(srcs, src_types, pos),
                parser.resolve_operands(dsts, dst_types, pos),
            ],
            properties=properties,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_tree_side(printer, self.src_tree.data, list(self.srcs))
        printer.print_string(" -> ")
        _print_tree_side(printer, self.dst_tree.data, list(self.dsts))
        if self.add is not None:
            printer.print_string(" add")
        printer.print_string(" : (")
        printer.print_list([v.type for v in self.srcs], printer.print_attribute)
        printer.print_string(") -> (")
        printer.print_list([v.type for v in self.dsts], printer.print_attribute)
        printer.print_string(")")


def _parse_tree_side(parser: Parser) -> tuple[str, list[UnresolvedOperand]]:
    """A pytree of operands, or `spec "..." (%a, ...)` for a malformed one."""
    if parser.parse_optional_keyword("spec") is not None:
        spec = parser.parse_str_literal()
        leaves = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        return spec, leaves
    tree, leaves = pytree.flatten(_parse_tree(parser))
    return tree.spec, leaves


def _print_tree_side(printer: Printer, spec: str, leaves: list[SSAValue]) -> None:
    """The pytree with its operands; a spec that does not fit them is printed
    as `spec "..."` and a flat operand list, so invalid IR round-trips too."""
    try:
        tree = pytree.parse_spec(spec)
    except CopyIRError:
        tree = None
    if tree is not None and tree.num_leaves == len(leaves):
        _print_tree(printer, tree, iter(leaves))
        return
    printer.print_string("spec ")
    printer.print_string_literal(spec)
    printer.print_string(" (")
    printer.print_list(leaves, printer.print_operand)
    printer.print_string(")")


def _parse_tree(parser: Parser, depth: int = 0) -> object:
    """A pytree of operands in the MLIR form, as nested Python containers.

    `(%a, {x: %b})` gives `(a, {"x": b})` with unresolved operands as
    leaves; `pytree.flatten` then orders the leaves as JAX does.
    """
    if depth > pytree.MAX_DEPTH:
        parser.raise_error(errors.NESTED_TOO_DEEP.format(limit=pytree.MAX_DEPTH))
    if (operand := parser.parse_optional_unresolved_operand()) is not None:
        return operand
    if parser.parse_optional_punctuation("{") is not None:
        record: dict[str, object] = {}
        while parser.parse_optional_punctuation("}") is None:
            pos = parser.pos
            key = parser.parse_identifier(" as a record key")
            if key in record:
                parser.raise_error(errors.DUPLICATE_KEY.format(key=key), pos)
            parser.parse_punctuation(":")
            record[key] = _parse_tree(parser, depth + 1)
            if parser.parse_optional_punctuation(",") is None:
                parser.parse_punctuation("}")
                break
        return record
    closing = "]" if parser.parse_optional_punctuation("[") is not None else ")"
    if closing == ")":
        parser.parse_punctuation("(", " or a value to start a pytree")
    children: list[object] = []
    trailing = False
    while parser.parse_optional_punctuation(closing) is None:
        children.append(_parse_tree(parser, depth + 1))
        trailing = parser.parse_optional_punctuation(",") is not None
        if not trailing:
            parser.parse_punctuation(closing)
            break
    if closing == "]":
        return children
    if len(children) == 1 and not trailing:
        return children[0]
    return tuple(children)


def _print_tree(
    printer: Printer, tree: pytree.TreeDef, leaves: Iterator[SSAValue]
) -> None:
    """Print a pytree of operands, leaves in leaf order: `(%a, {x: %b})`."""
    if tree.kind == "leaf":
        printer.print_operand(next(leaves))
        return
    opening, closing = pytree.BRACKETS[tree.kind]
    printer.print_string(opening)
    for i, child in enumerate(tree.children):
        if i:
            printer.print_string(", ")
        if tree.kind == "record":
            printer.print_string(f"{tree.keys[i]}: ")
        _print_tree(printer, child, leaves)
    if tree.kind == "tuple" and len(tree.children) == 1:
        printer.print_string(",")
    printer.print_string(closing)


@irdl_op_definition
class BufferedRefOp(CopyOp):
    """A BufferedRef: `%bx = copy.buffered_ref : !copy.buffered<...>`.

    Its window, `buffers` slots of one block each, lives in VMEM (or SMEM).
    """

    name = "copy.buffered_ref"

    result = result_def(BufferedRefType)

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, type: BufferedRefType, name: str | None = None):
        super().__init__(result_types=[type])
        set_name(self.result, name)

    def check(self) -> None:
        self.check_type(self.result.type, describe(self.result))

    @staticmethod
    def check_type(type: BufferedRefType, name: str) -> None:
        """A BufferedRef's type: the block shape against the array, the
        buffer count, the window's space (a pipeline's operands too)."""
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
            if b.kind.data not in BLOCK_KINDS:
                raise CopyIRError(
                    errors.MALFORMED_VIEW.format(
                        name=name, why=f"unknown block kind {b.kind.data}"
                    )
                )
            if b.kind.data != SQUEEZED and not 1 <= b.size.data <= extent:
                raise CopyIRError(
                    errors.BLOCK_SIZE.format(size=b.size.data, dim=dim, extent=extent)
                )
        if type.buffers.data < 1:
            raise CopyIRError(errors.BAD_BUFFERS.format(buffers=type.buffers.data))
        if type.space.data not in ("vmem", "smem"):
            raise CopyIRError(errors.WINDOW_SPACE.format(space=type.space.data))


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

    src = operand_def()
    dst = operand_def()
    dynamic_indices = var_operand_def(IndexType)
    dynamic_slot = opt_operand_def(IndexType)
    sem = opt_operand_def()
    src_indices = opt_prop_def(DenseArrayBase[I64])
    dst_indices = opt_prop_def(DenseArrayBase[I64])
    slot = opt_prop_def(IntegerAttr[I64])
    action = opt_prop_def(StringAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

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
        static = (
            None
            if indices is None
            else [DYNAMIC if isinstance(i, SSAValue) else i for i in indices]
        )
        dynamic = [i for i in indices or () if isinstance(i, SSAValue)]
        properties = self.index_properties(
            static if on_src else None,
            None if on_src else static,
            slot if isinstance(slot, int) else 0,
        )
        if action is not None:
            properties["action"] = StringAttr(action)
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
        if self.dynamic_slot is not None:
            return self.dynamic_slot
        return self.slot.value.data if self.slot is not None else 0

    @property
    def action_value(self) -> str | None:
        """`start` or `wait` for an asynchronous copy; None for a synchronous one."""
        return None if self.action is None else self.action.data

    @property
    def block_indices(self) -> tuple[int | SSAValue, ...] | None:
        """The block indices: integers, or the index values they take."""
        attr = self.dst_indices if self.copy_in else self.src_indices
        if attr is None:
            return None
        dynamic = iter(self.dynamic_indices)
        return tuple(
            next(dynamic, None) if i == DYNAMIC else i for i in attr.get_values()
        )

    def check(self) -> None:
        if self.action is not None:
            check_action(self.action.data)
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
        type: BufferedRefType = bref.type
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
            if None in indices:
                raise CopyIRError(
                    errors.MALFORMED_VIEW.format(
                        name=bref_name, why="its dynamic indices and operands disagree"
                    )
                )
            check_block_indices(bref_name, type, indices)
        slot = self.slot_value
        if isinstance(slot, int) and not 0 <= slot < type.buffers.data:
            raise CopyIRError(
                errors.SLOT_OUT_OF_RANGE.format(
                    slot=slot, bref=bref_name, buffers=type.buffers.data
                )
            )

    @classmethod
    def parse(cls, parser: Parser) -> BufferedCopyOp:
        action = parser.parse_optional_str_literal()
        dynamic: list[UnresolvedOperand] = []
        src = parser.parse_unresolved_operand()
        src_indices = _parse_optional_indices(parser, dynamic)
        parser.parse_punctuation("->")
        dst = parser.parse_unresolved_operand()
        dst_indices = _parse_optional_indices(parser, dynamic)
        slot, slot_operand = 0, None
        if parser.parse_optional_keyword("slot") is not None:
            slot_operand = parser.parse_optional_unresolved_operand()
            if slot_operand is None:
                slot = _parse_i64(parser)
        sem = None
        if parser.parse_optional_keyword("sem") is not None:
            sem = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        src_type = parser.parse_type()
        parser.parse_punctuation("->")
        dst_type = parser.parse_type()
        sem_type = None
        if sem is not None:
            parser.parse_punctuation(",")
            sem_type = parser.parse_type()
        properties = cls.index_properties(src_indices, dst_indices, slot)
        if action is not None:
            properties["action"] = StringAttr(action)
        properties["operandSegmentSizes"] = cls.segments(
            len(dynamic), slot_operand is not None, sem is not None
        )
        index = IndexType()
        return cls.create(
            operands=[
                parser.resolve_operand(src, src_type),
                parser.resolve_operand(dst, dst_type),
                *(parser.resolve_operand(d, index) for d in dynamic),
                *(
                    [parser.resolve_operand(slot_operand, index)]
                    if slot_operand
                    else []
                ),
                *([parser.resolve_operand(sem, sem_type)] if sem is not None else []),
            ],
            properties=properties,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        if self.action is not None:
            printer.print_string_literal(self.action.data)
            printer.print_string(" ")
        printer.print_operand(self.src)
        dynamic = iter(self.dynamic_indices)
        _print_optional_indices(printer, self.src_indices, dynamic)
        printer.print_string(" -> ")
        printer.print_operand(self.dst)
        _print_optional_indices(printer, self.dst_indices, dynamic)
        if self.dynamic_slot is not None:
            printer.print_string(" slot ")
            printer.print_operand(self.dynamic_slot)
        elif self.slot is not None:
            printer.print_string(f" slot {self.slot.value.data}")
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
    bref_name: str, type: BufferedRefType, indices: Sequence[int | SSAValue]
) -> None:
    """Block indices against the grid: BLOCK_INDEX_COUNT and the bounds of
    the static ones (an index value is checked over its loops' domain)."""
    shape = type.get_shape()
    if len(indices) != len(shape):
        raise CopyIRError(
            errors.BLOCK_INDEX_COUNT.format(
                bref=bref_name, rank=len(shape), count=len(indices)
            )
        )
    expr = f"{bref_name}[{', '.join(_index_text(i) for i in indices)}]"
    for dim, (index, b, extent) in enumerate(
        zip(indices, type.block_dims, shape, strict=False)
    ):
        if isinstance(index, SSAValue):
            continue
        if index < 0:
            raise CopyIRError(errors.NEGATIVE_INDEX.format(index=index, expr=expr))
        if b.kind.data == ELEMENT:
            if index >= extent:
                raise CopyIRError(
                    errors.ELEMENT_INDEX_OUT_OF_BOUNDS.format(
                        index=index, dim=dim, bref=bref_name, extent=extent
                    )
                )
            continue
        grid = extent if b.kind.data == SQUEEZED else -(-extent // b.size.data)
        if index >= grid:
            raise CopyIRError(
                errors.BLOCK_INDEX_OUT_OF_BOUNDS.format(
                    index=index, dim=dim, bref=bref_name, extent=grid
                )
            )


def _index_text(index: int | SSAValue) -> str:
    return describe(index) if isinstance(index, SSAValue) else str(index)


def _parse_optional_indices(
    parser: Parser, dynamic: list[UnresolvedOperand]
) -> list[int] | None:
    """`[7, %i]`: integers and index values (which join `dynamic`)."""
    if parser.parse_optional_punctuation("[") is None:
        return None
    if parser.parse_optional_punctuation("]") is not None:
        return []

    def index() -> int:
        operand = parser.parse_optional_unresolved_operand()
        if operand is None:
            return _parse_i64(parser)
        dynamic.append(operand)
        return DYNAMIC

    indices = [index()]
    while parser.parse_optional_punctuation(",") is not None:
        indices.append(index())
    parser.parse_punctuation("]")
    return indices


def _print_optional_indices(
    printer: Printer, attr: DenseArrayBase | None, dynamic: Iterator[SSAValue]
) -> None:
    if attr is None:
        return
    printer.print_string("[")
    for k, i in enumerate(attr.get_values()):
        if k:
            printer.print_string(", ")
        if i == DYNAMIC:
            printer.print_operand(next(dynamic))
        else:
            printer.print_string(str(i))
    printer.print_string("]")


# --------------------------------------------------------------------------
# Loops, conditions, index values, descriptors and computations
# --------------------------------------------------------------------------


def kernel_level(op: Operation) -> Operation:
    """The op itself if it is in a kernel's body, else the loop or
    condition there that holds it: where what it needs once per kernel (a
    semaphore, a buffer) goes."""
    while not isinstance(op.parent_op(), KernelOp):
        op = op.parent_op()
    return op


def _parse_index_operands(parser: Parser) -> list[SSAValue]:
    """`(%i, %j)`: index values."""
    operands = parser.parse_comma_separated_list(
        parser.Delimiter.PAREN, parser.parse_unresolved_operand
    )
    return [parser.resolve_operand(o, IndexType()) for o in operands]


def _print_operands(printer: Printer, operands: Sequence[SSAValue]) -> None:
    printer.print_string("(")
    printer.print_list(operands, printer.print_operand)
    printer.print_string(")")


@irdl_op_definition
class ForOp(CopyOp):
    """A counted loop, or a grid of them: `copy.for %i in range(0, 8) {...}`,
    `copy.for %i, %j in grid(8, 3) {...}` (row-major, the last index
    fastest, as Pallas walks a grid).

    The body's arguments are the indices. `parallel` lists the dimensions
    whose iterations do not depend on each other (a grid's parallel
    dimension semantics), which the interpreter may run in any order.
    """

    name = "copy.for"

    lower = prop_def(DenseArrayBase[I64])
    upper = prop_def(DenseArrayBase[I64])
    grid = opt_prop_def(UnitAttr)
    parallel = opt_prop_def(DenseArrayBase[I64])
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    @property
    def indices(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args)

    @property
    def bounds(self) -> list[tuple[int, int]]:
        return list(zip(int_values(self.lower), int_values(self.upper), strict=False))

    @property
    def parallel_dims(self) -> tuple[int, ...]:
        return () if self.parallel is None else int_values(self.parallel)

    def check(self) -> None:
        lower, upper = int_values(self.lower), int_values(self.upper)
        args = self.body.block.args
        if len(lower) != len(upper) or len(args) != len(lower) or not lower:
            raise CopyIRError(
                errors.MALFORMED_LOOP.format(
                    why="its bounds and indices disagree in number"
                )
            )
        if any(not isinstance(a.type, IndexType) for a in args):
            raise CopyIRError(
                errors.MALFORMED_LOOP.format(why="its indices are not index values")
            )
        if self.grid is not None:
            if any(upper[d] < 1 or lower[d] for d in range(len(upper))):
                grid = ", ".join(map(str, upper)) + ("," if len(upper) == 1 else "")
                raise CopyIRError(errors.GRID_NOT_POSITIVE.format(grid=f"({grid})"))
        else:
            for arg, lo, hi in zip(args, lower, upper, strict=True):
                if hi <= lo:
                    raise CopyIRError(
                        errors.EMPTY_LOOP.format(
                            name=describe(arg), lower=lo, upper=hi, count=hi - lo
                        )
                    )
        if any(not 0 <= d < len(upper) for d in self.parallel_dims):
            raise CopyIRError(
                errors.MALFORMED_LOOP.format(why="a parallel dimension out of range")
            )

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        names = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, lambda: parser.parse_argument(expect_type=False)
        )
        parser.parse_keyword("in")
        properties: dict[str, Attribute] = {}
        if parser.parse_optional_keyword("grid") is not None:
            upper = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, lambda: _parse_i64(parser)
            )
            lower = [0] * len(upper)
            properties["grid"] = UnitAttr()
        else:
            parser.parse_keyword("range")
            parser.parse_punctuation("(")
            lower = [_parse_i64(parser)]
            parser.parse_punctuation(",")
            upper = [_parse_i64(parser)]
            parser.parse_punctuation(")")
        if parser.parse_optional_keyword("parallel") is not None:
            parallel = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: _parse_i64(parser)
            )
            properties["parallel"] = i64_array(tuple(parallel))
        properties["lower"] = i64_array(tuple(lower))
        properties["upper"] = i64_array(tuple(upper))
        args = [name.resolve(IndexType()) for name in names]
        body = parser.parse_region(args)
        return cls.create(properties=properties, regions=[body])

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.body.block.args, printer.print_operand)
        lower, upper = int_values(self.lower), int_values(self.upper)
        if self.grid is not None:
            printer.print_string(f" in grid({', '.join(map(str, upper))})")
        else:
            printer.print_string(f" in range({lower[0]}, {upper[0]})")
        if self.parallel is not None:
            printer.print_string(
                f" parallel [{', '.join(map(str, self.parallel_dims))}]"
            )
        printer.print_string(" ")
        # An empty body prints as `{}`: its arguments are named before it.
        printer.print_region(
            self.body, print_entry_block_args=False, print_empty_block=False
        )


def check_evaluable(exprs: list[AffineExpr]) -> None:
    """Index expressions have a value at every point: their constants fit
    in 64 bits and none divides by zero."""
    if (value := constant_out_of_range(exprs)) is not None:
        raise CopyIRError(errors.INT_RANGE.format(value=value))
    if divides_by_zero(exprs):
        raise CopyIRError(errors.DIVIDES_BY_ZERO)


@irdl_op_definition
class IndexOp(CopyOp):
    """An index value, affine in others: `%slot = copy.index
    affine_map<(d0) -> (d0 mod 2)>(%i)`, dimension k being operand k."""

    name = "copy.index"

    args = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)
    result = result_def(IndexType)

    def expression_text(self) -> str:
        """The index expression in the authoring syntax, for messages."""
        from copyir.index import format_expr

        affine_map = self.map.data
        if len(affine_map.results) != 1 or affine_map.num_dims != len(self.args):
            return str(affine_map)
        return format_expr(affine_map.results[0], [describe(a) for a in self.args])

    def check(self) -> None:
        affine_map = self.map.data
        if (
            len(affine_map.results) != 1
            or affine_map.num_dims != len(self.args)
            or affine_map.num_symbols
        ):
            raise CopyIRError(
                errors.MALFORMED_INDEX.format(
                    why=f"its map {affine_map} does not take "
                    f"{len(self.args)} indices to one"
                )
            )
        check_evaluable(affine_map.results)

    @classmethod
    def parse(cls, parser: Parser) -> IndexOp:
        affine_map = parser.parse_attribute()
        args = _parse_index_operands(parser)
        return cls.create(
            operands=args, properties={"map": affine_map}, result_types=[IndexType()]
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.map)
        _print_operands(printer, self.args)


@irdl_op_definition
class WhenOp(CopyOp):
    """Run the body only where a condition holds (`pl.when`): `copy.when
    [affine_set<(d0) : (198 - d0 >= 0)>](%i) { ... }`, an `or` of the
    sets, dimension k being operand k."""

    name = "copy.when"

    args = var_operand_def(IndexType)
    condition = prop_def(ArrayAttr[AffineSetAttr])
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    def check(self) -> None:
        for affine_set in self.condition.data:
            if (
                affine_set.data.num_dims != len(self.args)
                or affine_set.data.num_symbols
            ):
                raise CopyIRError(
                    errors.MALFORMED_INDEX.format(
                        why=f"its condition {affine_set.data} does not take "
                        f"{len(self.args)} indices"
                    )
                )
            constraints = affine_set.data.constraints
            check_evaluable([e for c in constraints for e in (c.lhs, c.rhs)])

    @classmethod
    def parse(cls, parser: Parser) -> WhenOp:
        condition = parser.parse_attribute()
        args = _parse_index_operands(parser)
        body = parser.parse_region()
        return cls.create(
            operands=args, properties={"condition": condition}, regions=[body]
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.condition)
        _print_operands(printer, self.args)
        printer.print_string(" ")
        printer.print_region(self.body)


@irdl_op_definition
class AsyncCopyOp(CopyOp):
    """A copy descriptor, `pltpu.make_async_copy(src, dst, sem)`:
    `%c = copy.async_copy %src, %dst, %sem : ...`. It names its three
    values as evaluated where it is made; `copy.async_dma` starts or waits
    it."""

    name = "copy.async_copy"

    src = operand_def()
    dst = operand_def()
    sem = operand_def()
    result = result_def(DescriptorType)

    assembly_format = (
        "$src `,` $dst `,` $sem attr-dict `:` type($src) `,` type($dst) `,` type($sem)"
    )

    def written(self) -> tuple[SSAValue, ...]:
        return (self.dst,)

    def check(self) -> None:
        src = expect_ref("async_copy", "src", self.src)
        dst = expect_ref("async_copy", "dst", self.dst)
        expect_semaphore("async_copy", "sem", self.sem)
        try:
            check_dma_types(src, dst)
        except CopyIRError as err:
            note = Note(types_note(self.src, self.dst))
            raise CopyIRError(err.message, notes=(note,)) from None

    def verify_accesses(self, accesses: Accesses) -> None:
        check_no_overlap(self.src, self.dst, accesses)


@irdl_op_definition
class AsyncDmaOp(CopyOp):
    """Start or wait a descriptor: `copy.async_dma "start" %c add priority 1`
    is `c.start()`, `"wait"` is `c.wait()`; the action is exactly `start`
    or `wait`, as every action copyir names."""

    name = "copy.async_dma"

    action = prop_def(StringAttr)
    descriptor = operand_def(DescriptorType)
    add = opt_prop_def(UnitAttr)
    priority = opt_prop_def(IntegerAttr[I64])

    assembly_format = (
        "$action $descriptor (`add` $add^)? (`priority` $priority^)? attr-dict"
    )

    @property
    def is_start(self) -> bool:
        return self.action.data == "start"

    @property
    def priority_value(self) -> int:
        return self.priority.value.data if self.priority is not None else 0

    def check(self) -> None:
        check_action(self.action.data)
        if not self.is_start:
            for option, given in (
                ("add", self.add is not None),
                ("priority", self.priority is not None),
            ):
                if given:
                    raise CopyIRError(errors.WAIT_OPTIONS.format(option=option))
        if self.priority_value not in (0, 1):
            raise CopyIRError(errors.BAD_PRIORITY.format(priority=self.priority_value))


@irdl_op_definition
class ComputeOp(CopyOp):
    """An elementwise computation into a ref of VMEM or SMEM:
    `copy.compute %yw = "(add (mul 2.0 $0) 1.0)" (%xw) : ...`, operand `$k`
    being the k-th input (see `copyir.compute`). Every input has the
    destination's shape and dtype; literals take its dtype."""

    name = "copy.compute"

    dst = operand_def()
    inputs = var_operand_def()
    expression = prop_def(StringAttr)

    def written(self) -> tuple[SSAValue, ...]:
        return (self.dst,)

    def parsed(self):
        from copyir.compute import parse

        return parse(self.expression.data)

    def check(self) -> None:
        from copyir.compute import check

        dst = expect_ref("a computation", "destination", self.dst)
        inputs = [expect_ref("a computation", "input", v) for v in self.inputs]
        if dst.space_name == "hbm":
            raise CopyIRError(errors.HBM_STORE)
        for value, type in zip(self.inputs, inputs, strict=True):
            if type.space_name == "hbm":
                raise CopyIRError(errors.HBM_LOAD)
            if type.element_type != dst.element_type:
                raise CopyIRError(
                    errors.COMPUTE_DTYPE.format(
                        name=describe(value), type=type.describe(), dst=dst.describe()
                    )
                )
            if type.get_shape() != dst.get_shape():
                raise CopyIRError(
                    errors.COMPUTE_SHAPE.format(
                        name=describe(value), type=type.describe(), dst=dst.describe()
                    )
                )
            if type.space_name == "smem" and type.get_shape():
                raise CopyIRError(errors.SMEM_LOAD)
        if dst.space_name == "smem" and dst.get_shape():
            raise CopyIRError(errors.SMEM_STORE)
        if dst.space_name == "vmem" and not dst.get_shape():
            raise CopyIRError(errors.VMEM_SCALAR_STORE)
        check(self.expression.data, dst.dtype, len(inputs))

    @classmethod
    def parse(cls, parser: Parser) -> ComputeOp:
        dst = parser.parse_unresolved_operand()
        parser.parse_punctuation("=")
        expression = parser.parse_str_literal()
        inputs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        parser.parse_punctuation(":")
        dst_type = parser.parse_type()
        types = []
        if parser.parse_optional_punctuation(",") is not None:
            types = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_type
            )
        if len(types) != len(inputs):
            parser.raise_error("copy.compute needs one type per input")
        return cls.create(
            operands=[
                parser.resolve_operand(dst, dst_type),
                *(
                    parser.resolve_operand(o, t)
                    for o, t in zip(inputs, types, strict=True)
                ),
            ],
            properties={"expression": StringAttr(expression)},
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.dst)
        printer.print_string(" = ")
        printer.print_string_literal(self.expression.data)
        printer.print_string(" ")
        _print_operands(printer, self.inputs)
        printer.print_string(" : ")
        printer.print_list(
            [self.dst.type, *(v.type for v in self.inputs)], printer.print_attribute
        )


@irdl_op_definition
class InvalidateOp(CopyOp):
    """Mark a ref's memory unwritten again: `copy.invalidate %w : !copy.ref<...>`.

    Reading it before something writes it is a read of memory nobody wrote,
    as for fresh scratch; a pipeline marks an output window so at a block's
    first visit, so that a body that reads it before writing is caught.
    """

    name = "copy.invalidate"

    ref = operand_def()

    assembly_format = "$ref attr-dict `:` type($ref)"

    def written(self) -> tuple[SSAValue, ...]:
        return (self.ref,)

    def check(self) -> None:
        expect_ref("invalidate", "ref", self.ref)


@irdl_op_definition
class WindowOp(CopyOp):
    """One slot of a BufferedRef's window as a ref: `%w = copy.window
    %bx[%slot] : !copy.buffered<...>` (Pallas' `BufferedRef.current_ref`),
    the block shape without its squeezed dimensions, in the window's space."""

    name = "copy.window"

    bref = operand_def(BufferedRefType)
    dynamic_slot = opt_operand_def(IndexType)
    slot = opt_prop_def(IntegerAttr[I64])
    result = result_def()

    @property
    def slot_value(self) -> int | SSAValue:
        if self.dynamic_slot is not None:
            return self.dynamic_slot
        return self.slot.value.data if self.slot is not None else 0

    @staticmethod
    def slot_type(bref: BufferedRefType) -> RefType:
        window = bref.window_type
        return ref_type(window.get_shape()[1:], window.element_type, window.space_name)

    def check(self) -> None:
        bref: BufferedRefType = self.bref.type
        slot = self.slot_value
        if isinstance(slot, int) and not 0 <= slot < bref.buffers.data:
            raise CopyIRError(
                errors.SLOT_OUT_OF_RANGE.format(
                    slot=slot, bref=describe(self.bref), buffers=bref.buffers.data
                )
            )
        if self.result.type != self.slot_type(bref):
            raise CopyIRError(
                errors.MALFORMED_VIEW.format(
                    name=describe(self.bref),
                    why=f"its type should be {describe_type(self.slot_type(bref))}",
                )
            )

    @classmethod
    def parse(cls, parser: Parser) -> WindowOp:
        bref = parser.parse_unresolved_operand()
        parser.parse_punctuation("[")
        slot = parser.parse_optional_unresolved_operand()
        properties: dict[str, Attribute] = {}
        if slot is None:
            properties["slot"] = IntegerAttr(_parse_i64(parser), i64)
        parser.parse_punctuation("]")
        parser.parse_punctuation(":")
        type = parser.parse_type()
        operands = [parser.resolve_operand(bref, type)]
        if slot is not None:
            operands.append(parser.resolve_operand(slot, IndexType()))
        result = cls.slot_type(type) if isinstance(type, BufferedRefType) else type
        return cls.create(
            operands=operands, properties=properties, result_types=[result]
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.bref)
        printer.print_string("[")
        slot = self.slot_value
        if isinstance(slot, SSAValue):
            printer.print_operand(slot)
        else:
            printer.print_string(str(slot))
        printer.print_string("] : ")
        printer.print_attribute(self.bref.type)


IN, OUT = 0, 1


_INDEX_NAMES = ("i", "j", "k", "l", "m", "n")


def default_index_name(dim: int) -> str:
    """The name of an unnamed grid index `dim` of a pipeline."""
    return _INDEX_NAMES[dim] if dim < len(_INDEX_NAMES) else f"i{dim}"


@irdl_op_definition
class PipelineOp(CopyOp):
    """`pltpu.emit_pipeline`: stream blocks of HBM refs through VMEM windows
    over a grid, running the body once per grid point on the current
    windows.

    `copy.pipeline grid(8, 3) in %x block [128, 128] index affine_map<(d0,
    d1) -> (d0, d1)> buffers 3, out %y block [...] index ... buffers 2
    (%xw, %yw, %i, %j) { ... }`: each operand is an input or an output, with
    a block shape (as a BufferedRef's), an index map from the grid indices
    to block indices and a buffer count; the body's arguments are the
    operands' windows (VMEM refs of the block shape, squeezed dimensions
    dropped), then the grid indices. `parallel [0]` names the grid's
    parallel dimensions (a prefix); `no_pipelining` copies every block in
    and out synchronously around each step. `expand-pipelines` lowers it to
    loops of asynchronous window copies, with Pallas' schedule
    (`copyir.pipelines`).
    """

    name = "copy.pipeline"

    refs = var_operand_def()
    grid = prop_def(DenseArrayBase[I64])
    directions = prop_def(DenseArrayBase[I64])
    blocks = prop_def(ArrayAttr[ArrayAttr[BlockDimAttr]])
    index_maps = prop_def(ArrayAttr[AffineMapAttr])
    buffers = prop_def(DenseArrayBase[I64])
    parallel = opt_prop_def(DenseArrayBase[I64])
    no_pipelining = opt_prop_def(UnitAttr)
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return int_values(self.grid)

    @property
    def parallel_dims(self) -> tuple[int, ...]:
        return () if self.parallel is None else int_values(self.parallel)

    @property
    def windows(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args[: len(self.refs)])

    @property
    def indices(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args[len(self.refs) :])

    def index_name(self, dim: int) -> str:
        """Grid index `dim`'s name: the body's, or when the body names none
        (`(xw, yw) { ... }`), i, j, k, l, m, n, then i6, i7, ..., as the
        authoring syntax writes the index maps' parameters then and as
        messages name the iteration."""
        hint = self.indices[dim].name_hint if dim < len(self.indices) else None
        return hint or default_index_name(dim)

    def specs(self) -> list[tuple[SSAValue, bool, BufferedRefType, AffineMapAttr]]:
        """Per operand: the ref, whether it is an output, its BufferedRef
        type (block shape, buffers, window) and its index map."""
        found = []
        for ref, direction, block, index_map, buffers in zip(
            self.refs,
            int_values(self.directions),
            self.blocks.data,
            self.index_maps.data,
            int_values(self.buffers),
            strict=False,
        ):
            type = ref.type
            shape = type.get_shape() if isinstance(type, RefType) else ()
            element = type.element_type if isinstance(type, RefType) else i64
            bref = BufferedRefType(shape, element, block.data, buffers, "vmem")
            found.append((ref, direction == OUT, bref, index_map))
        return found

    @staticmethod
    def window_types(refs_types: Sequence[Attribute], blocks) -> list[Attribute]:
        """The body's window types, from the operands' types and blocks."""
        types = []
        for type, block in zip(refs_types, blocks, strict=False):
            kept = [b.size.data for b in block.data if b.kind.data != SQUEEZED]
            element = type.element_type if isinstance(type, RefType) else i64
            types.append(ref_type(tuple(kept), element, "vmem"))
        return types

    def check(self) -> None:
        grid = self.grid_shape
        if any(extent < 1 for extent in grid) or not grid:
            text = ", ".join(map(str, grid)) + ("," if len(grid) == 1 else "")
            raise CopyIRError(errors.GRID_NOT_POSITIVE.format(grid=f"({text})"))
        counts = {
            len(self.refs),
            len(int_values(self.directions)),
            len(self.blocks.data),
            len(self.index_maps.data),
            len(int_values(self.buffers)),
        }
        if len(counts) != 1:
            raise CopyIRError(
                errors.MALFORMED_PIPELINE.format(why="its specs disagree in number")
            )
        parallel = self.parallel_dims
        if list(parallel) != list(range(len(parallel))) or len(parallel) > len(grid):
            raise CopyIRError(errors.PARALLEL_PREFIX)
        args = self.body.block.args
        if len(args) != len(self.refs) + len(grid):
            raise CopyIRError(
                errors.MALFORMED_PIPELINE.format(
                    why="its body takes a window per operand and an index per "
                    "grid dimension"
                )
            )
        for number, (ref, output, bref, index_map) in enumerate(self.specs()):
            type = expect_ref("pipeline", "operand", ref)
            if type.space_name != "hbm":
                raise CopyIRError(
                    errors.PIPELINE_OPERAND_SPACE.format(
                        name=describe(ref), type=type.describe()
                    )
                )
            BufferedRefOp.check_type(bref, describe(ref))
            if output and bref.buffers.data > 2:
                raise CopyIRError(errors.OUTPUT_BUFFERS)
            affine_map = index_map.data
            if (
                affine_map.num_dims != len(grid)
                or affine_map.num_symbols
                or len(affine_map.results) != len(type.get_shape())
            ):
                raise CopyIRError(
                    errors.INDEX_MAP_RANK.format(
                        name=describe(ref),
                        map=affine_map,
                        grid=len(grid),
                        rank=len(type.get_shape()),
                    )
                )
            check_evaluable(affine_map.results)
            window = self.windows[number]
            slot = bref.window_type
            if window.type != ref_type(slot.get_shape()[1:], type.element_type, "vmem"):
                raise CopyIRError(
                    errors.MALFORMED_PIPELINE.format(
                        why=f"the window of {describe(ref)} should be "
                        f"{describe_type(bref.window_type)} without its slot"
                    )
                )
        if any(not isinstance(i.type, IndexType) for i in self.indices):
            raise CopyIRError(
                errors.MALFORMED_PIPELINE.format(
                    why="its grid indices are not index values"
                )
            )

    @classmethod
    def parse(cls, parser: Parser) -> PipelineOp:
        parser.parse_keyword("grid")
        grid = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: _parse_i64(parser)
        )
        properties: dict[str, Attribute] = {"grid": i64_array(tuple(grid))}
        if parser.parse_optional_keyword("parallel") is not None:
            parallel = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: _parse_i64(parser)
            )
            properties["parallel"] = i64_array(tuple(parallel))
        if parser.parse_optional_keyword("no_pipelining") is not None:
            properties["no_pipelining"] = UnitAttr()

        def spec():
            direction = OUT if parser.parse_optional_keyword("out") else IN
            if direction == IN:
                parser.parse_keyword("in")
            ref = parser.parse_unresolved_operand()
            parser.parse_punctuation(":")
            type = parser.parse_type()
            parser.parse_keyword("block")
            start = parser.pos
            block = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: BlockDimAttr.parse_block_dim(parser)
            )
            shape = type.get_shape() if isinstance(type, RefType) else ()
            for dim, (b, extent) in enumerate(zip(block, shape, strict=False)):
                if b.kind.data != SQUEEZED and b.size.data < 1:  # no window type
                    message = errors.BLOCK_SIZE.format(
                        size=b.size.data, dim=dim, extent=extent
                    )
                    parser.raise_error(message, start, parser.pos)
            parser.parse_keyword("index")
            index_map = parser.parse_attribute()
            parser.parse_keyword("buffers")
            buffers = _parse_i64(parser)
            return (
                direction,
                parser.resolve_operand(ref, type),
                block,
                index_map,
                buffers,
            )

        specs = parser.parse_comma_separated_list(parser.Delimiter.NONE, spec)
        names = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        blocks = [ArrayAttr(s[2]) for s in specs]
        types = cls.window_types([s[1].type for s in specs], blocks)
        types += [IndexType()] * (len(names) - len(types))
        args = [name.resolve(t) for name, t in zip(names, types, strict=False)]
        body = parser.parse_region(args)
        properties |= {
            "directions": i64_array(tuple(s[0] for s in specs)),
            "blocks": ArrayAttr(blocks),
            "index_maps": ArrayAttr(s[3] for s in specs),
            "buffers": i64_array(tuple(s[4] for s in specs)),
        }
        return cls.create(
            operands=[s[1] for s in specs], properties=properties, regions=[body]
        )

    def print(self, printer: Printer) -> None:
        grid = ", ".join(map(str, self.grid_shape))
        printer.print_string(f" grid({grid})")
        if self.parallel is not None:
            printer.print_string(
                f" parallel [{', '.join(map(str, self.parallel_dims))}]"
            )
        if self.no_pipelining is not None:
            printer.print_string(" no_pipelining")
        for k, (ref, direction, block, index_map, buffers) in enumerate(
            zip(
                self.refs,
                int_values(self.directions),
                self.blocks.data,
                self.index_maps.data,
                int_values(self.buffers),
                strict=False,
            )
        ):
            printer.print_string("," if k else "")
            printer.print_string(" out " if direction == OUT else " in ")
            printer.print_operand(ref)
            printer.print_string(" : ")
            printer.print_attribute(ref.type)
            printer.print_string(" block [")
            printer.print_list(block.data, lambda b: b.print_block_dim(printer))
            printer.print_string("] index ")
            printer.print_attribute(index_map)
            printer.print_string(f" buffers {buffers}")
        printer.print_string(" (")
        printer.print_list(self.body.block.args, printer.print_operand)
        printer.print_string(") ")
        # An empty body prints as `{}`: its arguments are named before it.
        printer.print_region(
            self.body, print_entry_block_args=False, print_empty_block=False
        )


Copy = Dialect(
    "copy",
    [
        KernelOp,
        AllocOp,
        SemaphoreOp,
        ViewOp,
        SemIndexOp,
        DmaOp,
        SyncCopyOp,
        BufferedRefOp,
        BufferedCopyOp,
        ForOp,
        IndexOp,
        WhenOp,
        AsyncCopyOp,
        AsyncDmaOp,
        ComputeOp,
        InvalidateOp,
        PipelineOp,
        WindowOp,
    ],
    [
        RefType,
        SemaphoreType,
        SemaphoreArrayType,
        BlockDimAttr,
        BufferedRefType,
        DescriptorType,
    ],
)

__all__ = [
    "DYNAMIC",
    "AllocOp",
    "AsyncCopyOp",
    "AsyncDmaOp",
    "BufferedCopyOp",
    "BufferedRefOp",
    "BufferedRefType",
    "ComputeOp",
    "Copy",
    "DescriptorType",
    "DmaOp",
    "ForOp",
    "IndexOp",
    "InvalidateOp",
    "KernelOp",
    "PipelineOp",
    "RefType",
    "SemIndexOp",
    "SemaphoreArrayType",
    "SemaphoreOp",
    "SemaphoreType",
    "SyncCopyOp",
    "ViewOp",
    "WhenOp",
    "WindowOp",
]
