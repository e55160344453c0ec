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

Addresses and semaphore ids are static here. Counted loops will join as a
`dma.loop` op whose body's addresses and ids are affine in the loop index
(a base plus a per-iteration delta), so a large grid is one loop, not one
instruction per step.
"""

from __future__ import annotations

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
from xdsl.traits import IsolatedFromAbove, NoTerminator, SymbolOpInterface

from copyir.attributes import int_values


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


@irdl_op_definition
class StartOp(IRDLOperation):
    """Start a DMA of a strided box of elements between two addresses.

    `dma.start hbm 458752 array<i64: 384, 1> -> vmem 0 array<i64: 128, 1>
    f32 array<i64: 104, 128> sem 0 add priority 1`
    """

    name = "dma.start"

    src_space = prop_def(StringAttr)
    src_address = prop_def(IntegerAttr[I64])
    src_strides = prop_def(DenseArrayBase[I64])
    dst_space = prop_def(StringAttr)
    dst_address = prop_def(IntegerAttr[I64])
    dst_strides = prop_def(DenseArrayBase[I64])
    element_type = prop_def(Attribute)
    shape = prop_def(DenseArrayBase[I64])
    sem = prop_def(IntegerAttr[I64])
    add = opt_prop_def(UnitAttr)
    priority = opt_prop_def(IntegerAttr[I64])

    assembly_format = (
        "$src_space $src_address $src_strides `->` $dst_space $dst_address "
        "$dst_strides $element_type $shape `sem` $sem (`add` $add^)? "
        "(`priority` $priority^)? attr-dict"
    )


@irdl_op_definition
class WaitOp(IRDLOperation):
    """Wait until a semaphore holds `bytes`, then lower it by that many."""

    name = "dma.wait"

    sem = prop_def(IntegerAttr[I64])
    bytes = prop_def(IntegerAttr[I64])

    assembly_format = "`sem` $sem `bytes` $bytes attr-dict"


Dma = Dialect("dma", [ProgramOp, BufferOp, SemaphoreDeclOp, StartOp, WaitOp], [])
