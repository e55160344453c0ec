"""assign-addresses: give every buffer a byte address and every semaphore an id.

Kernel parameters are laid out in HBM, and scratch (`alloc`, window buffers
after expand-windows) in VMEM and SMEM, in program order, each at the next
address aligned as the target wants; a scope's buffers and semaphores get
theirs among the rest, once, in program order (every entry into the scope
reuses them, so a scope in a loop costs its buffers once; two scopes one
after the other do not share memory). A buffer that does not fit is an error
naming it, its size, and its space's capacity and free bytes. Semaphores get
consecutive ids, an array one id per element. The results are attributes:
`param_addresses` and `target` on the kernel, `address` on each alloc,
`sem_id` on each semaphore.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.passes import ModulePass

from copyir import errors
from copyir.dialects.copy import (
    AllocOp,
    BufferedRefOp,
    KernelOp,
    RefType,
    SemaphoreOp,
)
from copyir.errors import CopyIRError
from copyir.locations import loc_of
from copyir.target import Target, get_target

ADDRESS = "address"
PARAM_ADDRESSES = "param_addresses"
SEM_ID = "sem_id"
TARGET = "target"


@dataclass
class _Layout:
    """A bump allocator per memory space, checked against the target."""

    target: Target
    used: dict[str, int] = field(default_factory=dict)

    def place(self, name: str, type: RefType) -> int:
        space = type.space_name
        alignment = self.target.alignment(space)
        address = -(-self.used.get(space, 0) // alignment) * alignment
        capacity = self.target.capacity(space)
        if address + type.nbytes > capacity:
            raise CopyIRError(
                errors.DOES_NOT_FIT.format(
                    name=name,
                    size=type.nbytes,
                    space=space,
                    free=max(capacity - self.used.get(space, 0), 0),
                    capacity=capacity,
                    target=self.target.name,
                )
            )
        self.used[space] = address + type.nbytes
        return address


def assign_addresses(kernel: KernelOp, target: Target) -> None:
    layout = _Layout(target)
    addresses = []
    for arg, name in zip(kernel.params, kernel.param_names, strict=True):
        try:
            # verified: a kernel's parameters are refs
            addresses.append(layout.place(name, cast(RefType, arg.type)))
        except CopyIRError as err:
            raise err.at(loc_of(arg.location)) from None
    kernel.attributes[PARAM_ADDRESSES] = DenseArrayBase.from_list(i64, addresses)
    kernel.attributes[TARGET] = StringAttr(target.name)
    next_sem = 0
    for op in kernel.walk():  # a scope's allocs and semaphores too
        if isinstance(op, AllocOp):
            name = op.result.name_hint or "an alloc"
            try:
                address = layout.place(name, op.result.type)
            except CopyIRError as err:
                raise err.at(loc_of(op.location)) from None
            op.attributes[ADDRESS] = IntegerAttr(address, i64)
        elif isinstance(op, SemaphoreOp):
            op.attributes[SEM_ID] = IntegerAttr(next_sem, i64)
            next_sem += op.count
        elif isinstance(op, BufferedRefOp):
            raise CopyIRError(
                errors.NEEDS_PASS.format(
                    pass_name="assign-addresses",
                    before="expand-windows",
                    why="a BufferedRef has no buffer yet",
                ),
                loc_of(op.location),
            )


@dataclass(frozen=True)
class AssignAddressesPass(ModulePass):
    """Lay out buffers in their memory spaces and number the semaphores."""

    name = "assign-addresses"

    target: str = "default"
    """A built-in target's name (default, small) or a TOML file."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = get_target(self.target)
        for kernel in op.ops:
            if isinstance(kernel, KernelOp):
                assign_addresses(kernel, target)
