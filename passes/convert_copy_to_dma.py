"""convert-copy-to-dma: lower an address-assigned copy kernel to a DMA program.

Each kernel becomes a `dma.program`: a `dma.buffer` per parameter and per
scratch buffer, all at the top, then a `dma.start` or `dma.wait` per DMA in
program order.
Views disappear here: a DMA end is the root buffer's address plus the view's
element offset times the element size, the view's shape, and its strides in
elements, as `copyir.access` folds them (each view once per pass run). A
semaphore is its id plus its flat index into its semaphore array, folded the
same way. A wait lowers its semaphore by the bytes of its descriptor. Every instruction
keeps the location of the DMA it came from.

Needs expand-pytree-copies, expand-windows and assign-addresses first.
"""

from __future__ import annotations

from dataclasses import dataclass

from copyir.passes.assign_addresses import ADDRESS, PARAM_ADDRESSES, SEM_ID, TARGET
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, UnitAttr, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from copyir import errors
from copyir.access import Accesses
from copyir.attributes import i64_array, int_values
from copyir.dialects import dma
from copyir.dialects.copy import (
    AllocOp,
    DmaOp,
    KernelOp,
    RefType,
    SemaphoreArrayType,
    SemaphoreOp,
    SemIndexOp,
    ViewOp,
)
from copyir.errors import CopyIRError
from copyir.locations import loc_of

Strided = tuple[str, int, list[int], list[int]]
"""(space, byte address, shape, strides in elements) of one end of a DMA."""


class _Lowering:
    """The buffers and semaphores of one kernel, and its instructions."""

    def __init__(self, kernel: KernelOp):
        if PARAM_ADDRESSES not in kernel.attributes:
            raise self.needs("assign-addresses", "buffers have no addresses")
        self.kernel = kernel
        self.buffers: dict[SSAValue, tuple[str, int]] = {}
        self.sems: dict[SSAValue, int] = {}
        self.declarations: list[Operation] = []
        self.ops: list[Operation] = []
        self.semaphores = 0
        self.accesses = Accesses()

    @staticmethod
    def needs(before: str, why: str, op: Operation | None = None) -> CopyIRError:
        return CopyIRError(
            errors.NEEDS_PASS.format(
                pass_name="convert-copy-to-dma", before=before, why=why
            ),
            loc_of(op.location) if op is not None else None,
        )

    def program(self) -> dma.ProgramOp:
        kernel = self.kernel
        addresses = int_values(kernel.attributes[PARAM_ADDRESSES])
        for arg, name, address in zip(
            kernel.params, kernel.param_names, addresses, strict=True
        ):
            self.buffer(arg, name, "hbm", address, param=True)
        for op in kernel.body.block.ops:
            self.lower(op)
        target = kernel.attributes[TARGET].data
        body = Block([*self.declarations, *self.ops])
        return dma.ProgramOp(kernel.kernel_name, target, self.semaphores, Region(body))

    def buffer(
        self, value: SSAValue, name: str, space: str, address: int, param: bool
    ) -> None:
        type: RefType = value.type
        self.buffers[value] = (space, address)
        properties = {
            "buffer_name": StringAttr(name),
            "space": StringAttr(space),
            "address": IntegerAttr(address, i64),
            "element_type": type.element_type,
            "shape": i64_array(type.get_shape()),
        }
        if param:
            properties["param"] = UnitAttr()
        location = (
            value.owner.location
            if isinstance(value.owner, Operation)
            else (value.location)
        )
        self.declarations.append(
            dma.BufferOp.create(properties=properties, location=location)
        )

    def lower(self, op: Operation) -> None:
        if isinstance(op, AllocOp):
            if ADDRESS not in op.attributes:
                raise self.needs("assign-addresses", "an alloc has no address", op)
            name = op.result.name_hint or f"buffer{len(self.buffers)}"
            address = op.attributes[ADDRESS].value.data
            self.buffer(op.result, name, op.result.type.space_name, address, False)
        elif isinstance(op, SemaphoreOp):
            if SEM_ID not in op.attributes:
                raise self.needs("assign-addresses", "a semaphore has no id", op)
            first = op.attributes[SEM_ID].value.data
            self.sems[op.result] = first
            type = op.result.type
            shape = type.get_shape() if isinstance(type, SemaphoreArrayType) else ()
            count = 1
            for extent in shape:
                count *= extent
            self.semaphores = max(self.semaphores, first + count)
            if op.result.name_hint:  # named by the user: named in messages too
                properties = {
                    "sem_name": StringAttr(op.result.name_hint),
                    "first": IntegerAttr(first, i64),
                    "shape": i64_array(shape),
                }
                self.declarations.append(
                    dma.SemaphoreDeclOp.create(
                        properties=properties, location=op.location
                    )
                )
        elif isinstance(op, DmaOp):
            self.ops.append(self.instruction(op))
        elif not isinstance(op, ViewOp | SemIndexOp):
            raise self.needs(
                "expand-pytree-copies and expand-windows",
                f"{op.name} has no DMA form yet",
                op,
            )

    def instruction(self, op: DmaOp) -> Operation:
        src_space, src_address, shape, src_strides = self.strided(op.src)
        dst_space, dst_address, _, dst_strides = self.strided(op.dst)
        sem = IntegerAttr(self.sem_id(op.sem), i64)
        type: RefType = op.src.type
        if not op.is_start:
            return dma.WaitOp.create(
                properties={"sem": sem, "bytes": IntegerAttr(type.nbytes, i64)},
                location=op.location,
            )
        properties = {
            "src_space": StringAttr(src_space),
            "src_address": IntegerAttr(src_address, i64),
            "src_strides": i64_array(tuple(src_strides)),
            "dst_space": StringAttr(dst_space),
            "dst_address": IntegerAttr(dst_address, i64),
            "dst_strides": i64_array(tuple(dst_strides)),
            "element_type": type.element_type,
            "shape": i64_array(tuple(shape)),
            "sem": sem,
        }
        if op.add is not None:
            properties["add"] = UnitAttr()
        if op.priority_value:
            properties["priority"] = IntegerAttr(op.priority_value, i64)
        return dma.StartOp.create(properties=properties, location=op.location)

    def strided(self, value: SSAValue) -> Strided:
        access = self.accesses(value)
        space, address = self.buffers[access.root]
        itemsize = value.type.dtype.itemsize
        return (
            space,
            address + access.offset * itemsize,
            list(access.shape),
            list(access.strides),
        )

    def sem_id(self, value: SSAValue) -> int:
        access = self.accesses(value)
        return self.sems[access.root] + access.offset


@dataclass(frozen=True)
class ConvertCopyToDmaPass(ModulePass):
    """Lower address-assigned kernels to flat DMA programs."""

    name = "convert-copy-to-dma"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in list(op.ops):
            if isinstance(kernel, KernelOp):
                program = _Lowering(kernel).program()
                program.location = kernel.location
                op.body.block.insert_op_before(program, kernel)
                kernel.detach()
                kernel.erase(safe_erase=False)
