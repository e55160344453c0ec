"""The dma dialect: the TPU-like DMA instruction stream, loops kept as loops.

What `convert-copy-to-dma` produces from an address-assigned copy kernel:
a `dma.program` holding the kernel's buffers, each at a memory space and a
byte address (kernel parameters keep their names, shapes and dtypes so a
program runs on its own), the names of its semaphores (`dma.semaphore`),
then its instructions in program order: `dma.start`, `dma.wait`,
`dma.invalidate`, `dma.compute`, `dma.opaque`, `dma.release` and
`dma.release_sem`, inside `dma.loop`s. A start moves a
strided box of elements (shape, and strides in elements at each end)
between two addresses and signals a semaphore by id; a wait lowers a
semaphore by a byte count. Every instruction is located at its source
statement, with the pytree leaf or block it came from as a named location.

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
elementwise expression over boxes of VMEM or SMEM; `dma.opaque` is a box
that an opaque computation reads or writes with poison. A scope of the
program becomes an invalidation of each of its buffers where it starts, and a
`dma.release` of each buffer and `dma.release_sem` of each semaphore where
it ends: no DMA may still be in flight on them there.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
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

from copyir import dma_schema as schema
from copyir.dma_schema import Field


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """A lowered kernel: `dma.program "k" target "default" semaphores 3 { ... }`."""

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
    """A buffer: `dma.buffer "x" "hbm" 0 f32 [8, 128] param`.

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


class InstructionOp(IRDLOperation):
    """An instruction of the stream: its properties, text and table columns
    are those of its fields (`copyir.dma_schema`), parsed and printed here
    in their order, each after a space."""

    FIELDS: ClassVar[tuple[Field, ...]] = ()

    @classmethod
    def parse(cls, parser: Parser) -> InstructionOp:
        properties: dict[str, Attribute] = {}
        for field in cls.FIELDS:
            properties |= field.parse(parser)
        return cls.create(properties=properties)

    def print(self, printer: Printer) -> None:
        for field in self.FIELDS:
            if (text := field.text(self)) is not None:
                printer.print_string(" " + text)


def instruction(cls: type[InstructionOp]) -> type[InstructionOp]:
    """Define an instruction op whose properties are those of its FIELDS."""
    for field in cls.FIELDS:
        for name, definition in field.properties().items():
            setattr(cls, name, definition)
    return irdl_op_definition(cls)


@instruction
class StartOp(InstructionOp):
    """Start a DMA of a strided box of elements between two addresses.

    `dma.start "hbm" 458752 [384, 1] -> "vmem" 0 [128, 1] f32 [104, 128]
    sem 0 add priority 1`; inside loops an address or the semaphore may be
    `{(d0) -> (...)}`, and `if {...}` guards the instruction.
    """

    name = "dma.start"
    FIELDS: ClassVar = schema.START_FIELDS


@instruction
class WaitOp(InstructionOp):
    """Wait until a semaphore holds `bytes`, then lower it by that many:
    `dma.wait sem 0 bytes 4096`."""

    name = "dma.wait"
    FIELDS: ClassVar = schema.WAIT_FIELDS


@instruction
class InvalidateOp(InstructionOp):
    """Mark a box unwritten again: `dma.invalidate "vmem" 0 [128, 1] f32 [8, 128]`.

    Reading it before anything writes it again is a read of memory nobody
    wrote, as for fresh scratch. A `stale` one (a pipeline's output window
    at a block's first visit) keeps the bytes, and a DMA may copy them on,
    as Pallas writes a whole window back: a warning names where they land.
    """

    name = "dma.invalidate"
    FIELDS: ClassVar = schema.INVALIDATE_FIELDS


@instruction
class ComputeOp(InstructionOp):
    """Evaluate an elementwise expression into a box of VMEM or SMEM.

    `dma.compute "vmem" 0 [128, 1] f32 [8, 128] = "(add (mul 2.0 $0) 1.0)"
    ("vmem" 8192 [128, 1])`: operand `$k` is the k-th box after the
    expression, each of the destination's shape and dtype (see
    `copyir.compute` for the expression's form).
    """

    name = "dma.compute"
    FIELDS: ClassVar = schema.COMPUTE_FIELDS


@instruction
class OpaqueOp(InstructionOp):
    """One ref of an opaque computation (`copy.opaque`): a box it reads,
    or a box it writes with poison.

    `dma.opaque "exp" reads "vmem" 0 [128, 1] f32 [8, 128]`, then
    `dma.opaque "exp" writes "vmem" 4096 [128, 1] f32 [8, 128]`: the
    instructions of one opaque computation run at one instant, its reads
    first; the poison counts as written, and a kernel's output that holds
    it at the end of a run is reported.
    """

    name = "dma.opaque"
    FIELDS: ClassVar = schema.OPAQUE_FIELDS


@instruction
class ReleaseOp(InstructionOp):
    """The end of a scope's buffer: `dma.release "vmem" 0 [128, 1] f32 [8,
    128]`. No DMA may still be in flight into or out of the box."""

    name = "dma.release"
    FIELDS: ClassVar = schema.RELEASE_FIELDS


@instruction
class ReleaseSemOp(InstructionOp):
    """The end of a scope's semaphore: `dma.release_sem sem 3`. No DMA on it
    may still be in flight (so it is back at zero)."""

    name = "dma.release_sem"
    FIELDS: ClassVar = schema.RELEASE_SEM_FIELDS


INSTRUCTIONS = (
    StartOp,
    WaitOp,
    InvalidateOp,
    ComputeOp,
    OpaqueOp,
    ReleaseOp,
    ReleaseSemOp,
)
"""Per instruction code (`copyir.dma_schema.START` ...), its op."""

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
        OpaqueOp,
        ReleaseOp,
        ReleaseSemOp,
    ],
    [],
)
