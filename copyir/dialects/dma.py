"""The dma dialect: the flat, TPU-like DMA instruction stream.

What `convert-copy-to-dma` produces from an address-assigned copy kernel:
a `dma.program` holding the kernel's buffers, each at a memory space and a
byte address (kernel parameters keep their names, shapes and dtypes so a
program runs on its own), then `dma.start` and `dma.wait` instructions in
program order. A start moves a strided box of elements (shape, and strides
in elements at each end) between two addresses and signals a semaphore by
id; a wait lowers a semaphore by a byte count. Every instruction is located
at its source statement, with the pytree leaf or block it came from as a
named location.

The ops hold what the stream's tables hold and check nothing themselves:
`copyir.validate` is the one validator of streams, on the tables, whether
they come from this text, from a `.npz` file or from the lowering.

Loops stay loops: `dma.loop "i" 200000 { ... }` runs its body once per
index, and an instruction inside may give its addresses and semaphore id
as affine maps of the enclosing loops' indices (d0 the outermost), written
`{(d0) -> (d0 * 4096)}`, and a predicate, `if {(d0) : (d0 - 1 >= 0)}` (an
`or` of affine sets), so that a grid of 200,000 steps is a few instructions,
not one per step. `dma.invalidate` marks a region unwritten again (scratch
reused, a window at a block's first visit); `dma.compute` evaluates an
elementwise expression over boxes of VMEM or SMEM.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Dialect, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, NoTerminator, SymbolOpInterface

from copyir import errors
from copyir.attributes import i64_array, int_values

Value = IntegerAttr | AffineMapAttr
"""A field that is static (an integer) or affine in the loop indices."""
Predicate = ArrayAttr[AffineSetAttr]
"""An instruction runs where any of these sets holds (an `or` of `and`s)."""


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """A lowered kernel: `dma.program @k target "default" semaphores 3 { ... }`."""

    name = "dma.program"

    sym_name = prop_def(StringAttr)
    target = prop_def(StringAttr)
    semaphores = prop_def(IntegerAttr[I64])
    body = region_def("single_block")

    traits = traits_def(NoTerminator(), IsolatedFromAbove(), SymbolOpInterface())

    assembly_format = (
        "$sym_name `target` $target `semaphores` $semaphores attr-dict-with-keyword "
        "$body"
    )

    def __init__(self, name: str, target: str, semaphores: int, body: Region):
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "target": StringAttr(target),
                "semaphores": IntegerAttr(semaphores, i64),
            },
            regions=[body],
        )


@irdl_op_definition
class BufferOp(IRDLOperation):
    """A buffer: `dma.buffer "x" hbm 0 f32 array<i64: 8, 128> param`.

    Parameters (`param`) are the kernel's inputs and outputs, bound by name.
    """

    name = "dma.buffer"

    buffer_name = prop_def(StringAttr)
    space = prop_def(StringAttr)
    address = prop_def(IntegerAttr[I64])
    element_type = prop_def(Attribute)
    shape = prop_def(DenseArrayBase[I64])
    param = opt_prop_def(UnitAttr)

    assembly_format = (
        "$buffer_name $space $address $element_type $shape (`param` $param^)? attr-dict"
    )


@irdl_op_definition
class SemaphoreDeclOp(IRDLOperation):
    """A named semaphore, or array of them, and its first id:
    `dma.semaphore "sems" 1 [2, 3]` is ids 1 to 6, `sems[0, 0]` first.

    Only for messages: instructions use ids. A semaphore the lowering made
    itself (for a pytree or windowed copy) has no declaration.
    """

    name = "dma.semaphore"

    sem_name = prop_def(StringAttr)
    first = prop_def(IntegerAttr[I64])
    shape = prop_def(DenseArrayBase[I64])

    assembly_format = "$sem_name $first $shape attr-dict"

    @property
    def count(self) -> int:
        count = 1
        for extent in int_values(self.shape):
            count *= extent
        return count


# -- fields, as the text spells them ------------------------------------------------


def parse_i64(parser: Parser) -> int:
    """An integer that fits in 64 bits, as every field must."""
    start = parser.pos
    value = parser.parse_integer(allow_negative=True)
    if not -(2**63) <= value < 2**63:
        parser.raise_error(errors.INT_RANGE.format(value=value), start, parser.pos)
    return value


def parse_value(parser: Parser) -> Attribute:
    """`4096`, or `{(d0) -> (d0 * 4096)}`."""
    if parser.parse_optional_punctuation("{") is None:
        return IntegerAttr(parse_i64(parser), i64)
    value = AffineMapAttr(parser.parse_affine_map())
    parser.parse_punctuation("}")
    return value


def print_value(printer: Printer, value: Attribute) -> None:
    if isinstance(value, IntegerAttr):
        printer.print_string(str(value.value.data))
    else:
        printer.print_string(f"{{{value.data}}}")


def parse_ints(parser: Parser) -> DenseArrayBase:
    values = parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parse_i64(parser)
    )
    return i64_array(tuple(values))


def print_ints(printer: Printer, values: DenseArrayBase) -> None:
    printer.print_string(f"[{', '.join(map(str, int_values(values)))}]")


def parse_predicate(parser: Parser) -> Attribute | None:
    """`if {(d0) : (...)} or {(d0) : (...)}`, or nothing."""
    if parser.parse_optional_keyword("if") is None:
        return None
    sets = []
    while True:
        parser.parse_punctuation("{")
        sets.append(AffineSetAttr(parser.parse_affine_set()))
        parser.parse_punctuation("}")
        if parser.parse_optional_keyword("or") is None:
            return ArrayAttr(sets)


def print_predicate(printer: Printer, predicate: Attribute | None) -> None:
    if predicate is not None:
        printer.print_string(
            " if " + " or ".join(f"{{{s.data}}}" for s in predicate.data)
        )


def _end(parser: Parser) -> tuple[str, Attribute, DenseArrayBase]:
    space = parser.parse_str_literal()
    return space, parse_value(parser), parse_ints(parser)


def _print_end(printer: Printer, space, address, strides) -> None:
    printer.print_string(f'"{space.data}" ')
    print_value(printer, address)
    printer.print_string(" ")
    print_ints(printer, strides)


# -- instructions ---------------------------------------------------------------------


@irdl_op_definition
class LoopOp(IRDLOperation):
    """Run the body once per index: `dma.loop "i" 200000 parallel { ... }`.

    Inside, dimension d0 of an affine field is the outermost loop's index.
    `parallel` marks iterations that do not depend on each other (a grid's
    parallel dimension), which the interpreter may run in any order.
    """

    name = "dma.loop"

    iv_name = prop_def(StringAttr)
    trip_count = prop_def(IntegerAttr[I64])
    parallel = opt_prop_def(UnitAttr)
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    assembly_format = (
        "$iv_name $trip_count (`parallel` $parallel^)? attr-dict-with-keyword $body"
    )


@irdl_op_definition
class StartOp(IRDLOperation):
    """Start a DMA of a strided box of elements between two addresses.

    `dma.start "hbm" 458752 [384, 1] -> "vmem" 0 [128, 1] f32 [104, 128]
    sem 0 add priority 1`; inside loops an address or the semaphore may be
    `{(d0) -> (...)}`, and `if {...}` guards the instruction.
    """

    name = "dma.start"

    src_space = prop_def(StringAttr)
    src_address = prop_def(Value)
    src_strides = prop_def(DenseArrayBase[I64])
    dst_space = prop_def(StringAttr)
    dst_address = prop_def(Value)
    dst_strides = prop_def(DenseArrayBase[I64])
    element_type = prop_def(Attribute)
    shape = prop_def(DenseArrayBase[I64])
    sem = prop_def(Value)
    add = opt_prop_def(UnitAttr)
    priority = opt_prop_def(IntegerAttr[I64])
    predicate = opt_prop_def(Predicate)

    @classmethod
    def parse(cls, parser: Parser) -> StartOp:
        src_space, src_address, src_strides = _end(parser)
        parser.parse_punctuation("->")
        dst_space, dst_address, dst_strides = _end(parser)
        element_type = parser.parse_type()
        shape = parse_ints(parser)
        parser.parse_keyword("sem")
        properties = {
            "src_space": StringAttr(src_space),
            "src_address": src_address,
            "src_strides": src_strides,
            "dst_space": StringAttr(dst_space),
            "dst_address": dst_address,
            "dst_strides": dst_strides,
            "element_type": element_type,
            "shape": shape,
            "sem": parse_value(parser),
        }
        if parser.parse_optional_keyword("add") is not None:
            properties["add"] = UnitAttr()
        if parser.parse_optional_keyword("priority") is not None:
            properties["priority"] = IntegerAttr(parse_i64(parser), i64)
        if (predicate := parse_predicate(parser)) is not None:
            properties["predicate"] = predicate
        return cls.create(properties=properties)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_end(printer, self.src_space, self.src_address, self.src_strides)
        printer.print_string(" -> ")
        _print_end(printer, self.dst_space, self.dst_address, self.dst_strides)
        printer.print_string(" ")
        printer.print_attribute(self.element_type)
        printer.print_string(" ")
        print_ints(printer, self.shape)
        printer.print_string(" sem ")
        print_value(printer, self.sem)
        if self.add is not None:
            printer.print_string(" add")
        if self.priority is not None:
            printer.print_string(f" priority {self.priority.value.data}")
        print_predicate(printer, self.predicate)


@irdl_op_definition
class WaitOp(IRDLOperation):
    """Wait until a semaphore holds `bytes`, then lower it by that many."""

    name = "dma.wait"

    sem = prop_def(Value)
    bytes = prop_def(IntegerAttr[I64])
    predicate = opt_prop_def(Predicate)

    @classmethod
    def parse(cls, parser: Parser) -> WaitOp:
        parser.parse_keyword("sem")
        properties = {"sem": parse_value(parser)}
        parser.parse_keyword("bytes")
        properties["bytes"] = IntegerAttr(parse_i64(parser), i64)
        if (predicate := parse_predicate(parser)) is not None:
            properties["predicate"] = predicate
        return cls.create(properties=properties)

    def print(self, printer: Printer) -> None:
        printer.print_string(" sem ")
        print_value(printer, self.sem)
        printer.print_string(f" bytes {self.bytes.value.data}")
        print_predicate(printer, self.predicate)


@irdl_op_definition
class InvalidateOp(IRDLOperation):
    """Mark a box unwritten again: `dma.invalidate "vmem" 0 [128, 1] f32 [8, 128]`.

    Reading it before anything writes it again is a read of memory nobody
    wrote, as for fresh scratch.
    """

    name = "dma.invalidate"

    space = prop_def(StringAttr)
    address = prop_def(Value)
    strides = prop_def(DenseArrayBase[I64])
    element_type = prop_def(Attribute)
    shape = prop_def(DenseArrayBase[I64])
    predicate = opt_prop_def(Predicate)

    @classmethod
    def parse(cls, parser: Parser) -> InvalidateOp:
        space, address, strides = _end(parser)
        properties = {
            "space": StringAttr(space),
            "address": address,
            "strides": strides,
            "element_type": parser.parse_type(),
            "shape": parse_ints(parser),
        }
        if (predicate := parse_predicate(parser)) is not None:
            properties["predicate"] = predicate
        return cls.create(properties=properties)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_end(printer, self.space, self.address, self.strides)
        printer.print_string(" ")
        printer.print_attribute(self.element_type)
        printer.print_string(" ")
        print_ints(printer, self.shape)
        print_predicate(printer, self.predicate)


@irdl_op_definition
class ComputeOp(IRDLOperation):
    """Evaluate an elementwise expression into a box of VMEM or SMEM.

    `dma.compute "vmem" 0 [128, 1] f32 [8, 128] = "(add (mul 2.0 $0) 1.0)"
    ("vmem" 8192 [128, 1])`: operand `$k` is the k-th box after the
    expression, each of the destination's shape and dtype (see
    `copyir.compute` for the expression's form).
    """

    name = "dma.compute"

    space = prop_def(StringAttr)
    address = prop_def(Value)
    strides = prop_def(DenseArrayBase[I64])
    element_type = prop_def(Attribute)
    shape = prop_def(DenseArrayBase[I64])
    expression = prop_def(StringAttr)
    operand_spaces = prop_def(ArrayAttr[StringAttr])
    operand_addresses = prop_def(ArrayAttr[Value])
    operand_strides = prop_def(ArrayAttr[DenseArrayBase[I64]])
    predicate = opt_prop_def(Predicate)

    @classmethod
    def parse(cls, parser: Parser) -> ComputeOp:
        space, address, strides = _end(parser)
        element_type = parser.parse_type()
        shape = parse_ints(parser)
        parser.parse_punctuation("=")
        expression = parser.parse_str_literal()
        operands = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: _end(parser)
        )
        properties = {
            "space": StringAttr(space),
            "address": address,
            "strides": strides,
            "element_type": element_type,
            "shape": shape,
            "expression": StringAttr(expression),
            "operand_spaces": ArrayAttr(StringAttr(o[0]) for o in operands),
            "operand_addresses": ArrayAttr(o[1] for o in operands),
            "operand_strides": ArrayAttr(o[2] for o in operands),
        }
        if (predicate := parse_predicate(parser)) is not None:
            properties["predicate"] = predicate
        return cls.create(properties=properties)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_end(printer, self.space, self.address, self.strides)
        printer.print_string(" ")
        printer.print_attribute(self.element_type)
        printer.print_string(" ")
        print_ints(printer, self.shape)
        printer.print_string(" = ")
        printer.print_string_literal(self.expression.data)
        printer.print_string(" (")
        for k, (space, address, strides) in enumerate(self.operand_ends()):
            if k:
                printer.print_string(", ")
            _print_end(printer, space, address, strides)
        printer.print_string(")")
        print_predicate(printer, self.predicate)

    def operand_ends(self) -> Sequence[tuple[StringAttr, Attribute, DenseArrayBase]]:
        return list(
            zip(
                self.operand_spaces.data,
                self.operand_addresses.data,
                self.operand_strides.data,
                strict=True,
            )
        )


INSTRUCTIONS = (StartOp, WaitOp, InvalidateOp, ComputeOp)

Dma = Dialect(
    "dma",
    [
        ProgramOp,
        BufferOp,
        SemaphoreDeclOp,
        LoopOp,
        StartOp,
        WaitOp,
        InvalidateOp,
        ComputeOp,
    ],
    [],
)
