"""Refs and what makes them: kernels and their parameters, scratch
allocations, semaphores, scopes that allocate them afresh, and views of
refs and of semaphore arrays."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import I64, DenseArrayBase, IndexType, StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    IsolatedFromAbove,
    MemoryWriteEffect,
    NoTerminator,
    Pure,
    SymbolOpInterface,
)

from copyir import errors
from copyir.attributes import i64_array, int_values
from copyir.errors import CopyIRError
from copyir.locations import loc_of
from copyir.machine import MAX_SEMAPHORES

from .base import (
    CopyOp,
    create_typed,
    describe,
    expect_ref,
    expect_semaphore,
    print_attributes_and_types,
    set_name,
)
from .indexing import (
    IndexedOp,
    IndexList,
    parse_subscript,
    resolve_indices,
    subscript_text,
)
from .types import (
    DYNAMIC,
    SEMAPHORE,
    RefType,
    SemaphoreArrayType,
    SemaphoreType,
    Subscript,
    ref_type,
)


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
    def params(self) -> tuple[BlockArgument, ...]:
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

    result = result_def(RefType)

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

    @property
    def count(self) -> int:
        """How many semaphores it makes: its array's size, or 1."""
        type = self.result.type
        return (
            math.prod(type.get_shape()) if isinstance(type, SemaphoreArrayType) else 1
        )

    def check(self) -> None:
        type = self.result.type
        if not isinstance(type, SemaphoreArrayType):
            return
        shape = type.get_shape()
        if not shape or any(d < 1 for d in shape):
            raise CopyIRError(errors.BAD_SEMAPHORE_SHAPE.format(shape=list(shape)))
        if (count := self.count) > MAX_SEMAPHORES:
            raise CopyIRError(
                errors.TOO_MANY_SEMAPHORES.format(
                    count=count, name=describe(self.result), limit=MAX_SEMAPHORES
                )
            )


@irdl_op_definition
class ScopeOp(CopyOp):
    """Scratch and semaphores for one entry into a body, as Pallas'
    `pl.run_scoped`: `copy.scope { %buf = copy.alloc : ... ; ... }`.

    The `copy.alloc` and `copy.semaphore` ops directly in its body are made
    afresh on every entry (a buffer unwritten, a semaphore at zero) and end
    with it: leaving it while a DMA on one of them is in flight is an error.
    SSA dominance keeps their values inside. Builder: `ScopeOp()`, then
    append to `scope.body.block`.
    """

    name = "copy.scope"

    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    def __init__(self, body: Region | None = None):
        super().__init__(regions=[body if body is not None else Region(Block())])

    @classmethod
    def parse(cls, parser: Parser) -> ScopeOp:
        body = parser.parse_region()
        if not body.blocks:  # `{}`
            body.add_block(Block())
        attributes = parser.parse_optional_attr_dict()
        scope = cls.create(regions=[body])
        scope.attributes |= attributes
        return scope

    def print(self, printer: Printer) -> None:
        """`copy.scope {...}`; an empty one is `copy.scope {}`."""
        printer.print_string(" ")
        printer.print_region(
            self.body, print_entry_block_args=False, print_empty_block=False
        )
        printer.print_op_attributes(self.attributes)

    def allocations(self) -> list[AllocOp | SemaphoreOp]:
        """The buffers and semaphores it makes, in program order."""
        return [
            op for op in self.body.block.ops if isinstance(op, AllocOp | SemaphoreOp)
        ]


ALLOCATING = (KernelOp, ScopeOp)
"""The ops whose body may make buffers and semaphores: a kernel once, a
scope on every entry."""


def kernel_level(op: Operation) -> Operation:
    """The op itself if it is in a kernel's body, else the loop, condition
    or scope there that holds it: where what it needs once per kernel (a
    semaphore, a buffer) goes."""
    while not isinstance(parent := op.parent_op(), KernelOp):
        assert parent is not None, "the op is in a kernel"
        op = parent
    return op


_VIEW_TYPES: dict[tuple[int, tuple[Subscript, ...]], tuple[Attribute, Attribute]] = {}
"""View types by their source type's id and subscripts, each with the
source type, which the entry keeps alive so that no other takes its id."""

_VIEW_PROPERTIES: dict[tuple[Subscript, ...], dict[str, Attribute]] = {}
"""A view's properties by its subscripts (handed out as copies)."""

_SUBSCRIPTS: dict[tuple[int, int, int], tuple[tuple, list[Subscript]]] = {}
"""A view's decoded subscripts (see `ViewOp.subscripts`)."""

_SHARED = 4096
"""Bound of the two caches above; a full one starts afresh."""


def view_result_type(source: Attribute, subscripts: Sequence[Subscript]) -> Attribute:
    """The type of a view; a well-formed placeholder when the view is not.

    Parsers build views before verifying them, so an invalid view gets the
    source's type and the verifier reports the view itself. Shared: one
    object per source type and subscripts (by the source's identity, as a
    type's hash walks its parameters), so that checks remembered by
    identity (`CopyOp.check_inputs`) meet the same types again.
    """
    key = (id(source), tuple(subscripts))
    known = _VIEW_TYPES.get(key)
    if known is not None:
        return known[1]
    result = _view_result_type(source, subscripts)
    if len(_VIEW_TYPES) >= _SHARED:
        _VIEW_TYPES.clear()
    _VIEW_TYPES[key] = (source, result)
    return result


def _subscript_properties(subscripts: Sequence[Subscript]) -> dict[str, Attribute]:
    return {
        "offsets": i64_array(tuple(o for o, _, _ in subscripts)),
        "sizes": i64_array(tuple(s for _, s, _ in subscripts)),
        "dropped": i64_array(tuple(i for i, (_, _, d) in enumerate(subscripts) if d)),
    }


def _view_result_type(source: Attribute, subscripts: Sequence[Subscript]) -> Attribute:
    if not isinstance(source, RefType) or len(subscripts) > len(source.shape):
        return source
    shape = list(source.get_shape())
    kept = [size for _, size, dropped in subscripts if not dropped]
    new_shape = kept + shape[len(subscripts) :]
    if any(d < 1 for d in new_shape):
        return source
    return ref_type(tuple(new_shape), source.element_type, source.space_name)


def sem_index_result_type(source: Attribute, count: int) -> Attribute:
    if not isinstance(source, SemaphoreArrayType) or count >= len(source.shape):
        return SEMAPHORE
    return SemaphoreArrayType(source.get_shape()[count:])


@irdl_op_definition
class ViewOp(IndexedOp):
    """A view of a ref: unit-step slices and integer indices per dimension.

    `%v = copy.view %x[0:32, 5] : !copy.ref<64x8x128xf32, hbm>` views rows
    0:32, drops dimension 1 at index 5, and keeps all of dimension 2. Views
    alias their source. Each subscript is (offset, size, dropped); an index
    is a dropped subscript of size 1. A start may be an index value
    (`%x[%i, ds(%o, 8)]`): `DYNAMIC` in `offsets`, the value in
    `dynamic_offsets`, the way `memref.subview` mixes static and dynamic
    offsets.
    """

    name = "copy.view"

    source = operand_def(RefType)
    dynamic_offsets = var_operand_def(IndexType)
    offsets = prop_def(DenseArrayBase[I64])
    sizes = prop_def(DenseArrayBase[I64])
    dropped = prop_def(DenseArrayBase[I64])
    result = result_def(RefType)

    traits = traits_def(Pure())

    DYNAMIC_WORD: ClassVar[str] = "offsets"

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

    @staticmethod
    def subscript_properties(
        subscripts: Sequence[Subscript],
    ) -> dict[str, Attribute]:
        """`offsets`, `sizes` and `dropped`: a fresh dict of shared arrays."""
        key = tuple(subscripts)
        known = _VIEW_PROPERTIES.get(key)
        if known is None:
            if len(_VIEW_PROPERTIES) >= _SHARED:
                _VIEW_PROPERTIES.clear()
            known = _VIEW_PROPERTIES[key] = _subscript_properties(key)
        return dict(known)

    def static_starts(self) -> Sequence[int]:
        return int_values(self.offsets)

    def dynamic_starts(self) -> Sequence[SSAValue]:
        return self.dynamic_offsets

    def subscripts(self) -> list[Subscript]:
        """Decoded once per distinct (offsets, sizes, dropped), by their
        identities, each entry keeping the three alive: verify and the
        lowering ask often, and views of one program share their arrays
        (a list kept per op would be objects per op for the collector)."""
        offsets, sizes, dropped = self.offsets, self.sizes, self.dropped
        key = (id(offsets), id(sizes), id(dropped))
        known = _SUBSCRIPTS.get(key)
        if known is not None:
            return known[1]
        indexed = set(int_values(dropped))
        decoded = [
            (o, s, i in indexed)
            for i, (o, s) in enumerate(
                zip(int_values(offsets), int_values(sizes), strict=False)
            )
        ]
        if len(_SUBSCRIPTS) >= _SHARED:
            _SUBSCRIPTS.clear()
        _SUBSCRIPTS[key] = ((offsets, sizes, dropped), decoded)
        return decoded

    def check_inputs(self) -> tuple[Attribute, ...]:
        types = (self.source.type, self.result.type)
        return (*types, self.offsets, self.sizes, self.dropped)

    def check(self) -> None:
        source = expect_ref("a view", "source", self.source)
        offsets, sizes = int_values(self.offsets), int_values(self.sizes)
        self.check_dynamic_count()
        dropped = int_values(self.dropped)
        if len(offsets) != len(sizes) or any(
            not 0 <= d < len(offsets) for d in dropped
        ):
            self.malformed("offsets, sizes and dropped disagree")
        shape = source.get_shape()
        self.check_rank(len(shape))
        kept = []
        for dim, (offset, size) in enumerate(zip(offsets, sizes, strict=True)):
            extent, indexed = shape[dim], dim in dropped
            if indexed and size != 1:
                self.malformed("an indexed dimension must have size 1")
            if offset == DYNAMIC:  # checked over the loops' domain
                if size < 1 or size > extent:
                    self.subscript_error(dim, extent, 0, size, indexed)
            elif offset < 0 or size < 1 or offset + size > extent:
                self.subscript_error(dim, extent, offset, size, indexed)
            if not indexed:
                kept.append(size)
        result = self.result.type
        self.check_result(
            isinstance(result, RefType)
            and result.get_shape() == (*kept, *shape[len(offsets) :])
            and result.element_type == source.element_type
            and result.space == source.space,
            lambda: view_result_type(source, self.subscripts()),
        )

    @classmethod
    def parse(cls, parser: Parser) -> ViewOp:
        source = parser.parse_unresolved_operand()
        dynamic: list[UnresolvedOperand] = []
        subscripts = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parse_subscript(parser, dynamic)
        )
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        return cls.build(
            operands=[
                parser.resolve_operand(source, source_type),
                resolve_indices(parser, dynamic),
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
            if isinstance(start, SSAValue) and not dropped:
                printer.print_string("ds(")
                printer.print_operand(start)
                printer.print_string(f", {size})")
            elif isinstance(start, SSAValue):
                printer.print_operand(start)
            else:
                printer.print_string(subscript_text(start, size, dropped))
        printer.print_string("] : ")
        printer.print_attribute(self.source.type)


@irdl_op_definition
class SemIndexOp(IndexedOp):
    """One semaphore of an array: `%s = copy.sem_index %sems[1] :
    !copy.sem_array<2> -> !copy.sem`.

    Indexing fewer dimensions than the array has gives a smaller array; an
    index may be an index value (`%sems[%slot]`). The source may be a single
    semaphore, so that indexing one reaches the verifier's TOO_MANY_INDICES.
    """

    name = "copy.sem_index"

    source = operand_def(SemaphoreType | SemaphoreArrayType)
    dynamic_indices = var_operand_def(IndexType)
    indices = prop_def(DenseArrayBase[I64])
    result = result_def(SemaphoreType | SemaphoreArrayType)

    traits = traits_def(Pure())
    custom_directives = (IndexList,)
    assembly_format = (
        "$source `` custom<IndexList>($dynamic_indices, $indices) attr-dict "
        "`:` type($source) `->` type($result)"
    )

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

    def static_starts(self) -> Sequence[int]:
        return int_values(self.indices)

    def dynamic_starts(self) -> Sequence[SSAValue]:
        return self.dynamic_indices

    def subscripts(self) -> list[Subscript]:
        """The indices as a view's subscripts, each dropping its dimension."""
        return [(i, 1, True) for i in int_values(self.indices)]

    def check_inputs(self) -> tuple[Attribute, ...]:
        return (self.source.type, self.result.type, self.indices)

    def check(self) -> None:
        indices = int_values(self.indices)
        type = self.source.type
        if not isinstance(type, SemaphoreType | SemaphoreArrayType):
            expect_semaphore("sem_index", "source", self.source)
        shape = type.get_shape() if isinstance(type, SemaphoreArrayType) else ()
        self.check_rank(len(shape))
        self.check_dynamic_count()
        for dim, index in enumerate(indices):
            if index != DYNAMIC and not 0 <= index < shape[dim]:
                self.subscript_error(dim, shape[dim], index, 1, True)
        expected = sem_index_result_type(type, len(indices))
        self.check_result(self.result.type == expected, lambda: expected)


@irdl_op_definition
class InvalidateOp(CopyOp):
    """Mark a ref's memory unwritten again: `copy.invalidate %w : !copy.ref<...>`.

    Reading it before something writes it is a read of memory nobody wrote,
    as for fresh scratch. A pipeline marks an output window so at a block's
    first visit, `stale` (`copy.invalidate %w stale : ...`): a body that
    reads it before writing is caught, but the memory keeps its bytes and
    a DMA may copy them on, since Pallas writes the whole window back
    (rows the body did not write carry what the slot held), with a
    warning naming where they land.
    """

    name = "copy.invalidate"

    ref = operand_def(RefType)
    stale = opt_prop_def(UnitAttr)

    traits = traits_def(MemoryWriteEffect())

    def __init__(self, ref: SSAValue, stale: bool = False):
        super().__init__(
            operands=[ref], properties={"stale": UnitAttr()} if stale else {}
        )

    def written(self) -> tuple[SSAValue, ...]:
        return (self.ref,)

    def check(self) -> None:
        expect_ref("invalidate", "ref", self.ref)

    @classmethod
    def parse(cls, parser: Parser) -> InvalidateOp:
        ref = parser.parse_unresolved_operand()
        stale = parser.parse_optional_keyword("stale") is not None
        properties = {"stale": UnitAttr()} if stale else {}
        return create_typed(cls, parser, [ref], properties)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.ref)
        if self.stale is not None:
            printer.print_string(" stale")
        print_attributes_and_types(printer, self)
