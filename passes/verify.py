"""verify: check a copy program and report its first error, located.

One walk in program order: each op's operands must be defined before it
(xDSL's own verify does not check dominance), then the op's IRDL constraints
and its `verify_`, then, for the DMAs, the checks that look through views
(`verify_accesses`, given one `copyir.access.Accesses` for the whole
program, as MLIR's `verifySymbolUses` is given one symbol table, so that
each view is folded once however many DMAs use it). The first error wins
and carries the op's location, so a user sees one precise error at the line
that caused it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from copyir import errors
from copyir.access import Accesses
from copyir.dialects.copy import (
    AllocOp,
    BufferedRefOp,
    DmaOp,
    KernelOp,
    RefType,
    SyncCopyOp,
    describe,
)
from copyir.errors import CopyIRError
from copyir.locations import loc_of
from copyir.target import DEFAULT, Target, get_target


def verify(module: ModuleOp, target: Target = DEFAULT) -> None:
    """Raise the program's first error as a located `CopyIRError`.

    Besides each op's own checks: values defined before use, kernel names
    unique, and every buffer no larger than its space in the target.
    """
    kernels = list(module.ops)
    if not kernels:
        raise CopyIRError(errors.NO_KERNELS, loc_of(module.location))
    if any(block.args for block in module.body.blocks):
        raise CopyIRError(errors.MODULE_ARGUMENTS, loc_of(module.location))
    names = set()
    for kernel in kernels:
        if not isinstance(kernel, KernelOp):
            raise CopyIRError(
                errors.NOT_A_KERNEL.format(op=kernel.name), loc_of(kernel.location)
            )
        if kernel.kernel_name in names:
            raise CopyIRError(
                errors.DUPLICATE_KERNEL.format(name=kernel.kernel_name),
                loc_of(kernel.location),
            )
        names.add(kernel.kernel_name)
        _verify_op(kernel, set(), target, Accesses())


def _verify_op(
    op: Operation, defined: set[SSAValue], target: Target, accesses: Accesses
) -> None:
    for operand in op.operands:
        if operand not in defined:
            raise CopyIRError(
                errors.USED_BEFORE_DEFINED.format(name=describe(operand)),
                loc_of(op.location),
            )
    try:
        op.verify_()
        if isinstance(op, DmaOp | SyncCopyOp):
            op.verify_accesses(accesses)
        _check_capacity(op, target)
    except VerifyException as err:
        raise CopyIRError(str(err), loc_of(op.location)) from None
    except CopyIRError as err:
        raise err.at(loc_of(op.location)) from None
    for region in op.regions:
        for block in region.blocks:
            inner = defined | set(block.args)
            for child in block.ops:
                if not child.name.startswith("copy.") or isinstance(child, KernelOp):
                    raise CopyIRError(
                        errors.NOT_IN_KERNEL.format(op=child.name),
                        loc_of(child.location),
                    )
                _verify_op(child, inner, target, accesses)
                inner.update(child.results)
    defined.update(op.results)


def _check_capacity(op: Operation, target: Target) -> None:
    """No single buffer larger than its memory space (all of them together
    are assign-addresses' business)."""
    if isinstance(op, KernelOp):
        for arg, name in zip(op.params, op.param_names, strict=True):
            try:
                _fits(name, arg.type, target)
            except CopyIRError as err:
                raise err.at(loc_of(arg.location)) from None
    elif isinstance(op, AllocOp):
        _fits(describe(op.result), op.result.type, target)
    elif isinstance(op, BufferedRefOp):
        name = f"the window of {describe(op.result)}"
        _fits(name, op.result.type.window_type, target)


def _fits(name: str, type: RefType, target: Target) -> None:
    space = type.space_name
    if type.nbytes > target.capacity(space):
        raise CopyIRError(
            errors.OVER_CAPACITY.format(
                name=name,
                size=type.nbytes,
                space=space,
                capacity=target.capacity(space),
                target=target.name,
            )
        )


@dataclass(frozen=True)
class VerifyPass(ModulePass):
    """Check the program; report its first error at its line."""

    name = "verify"

    target: str = "default"
    """The target whose capacities bound each buffer."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        verify(op, get_target(self.target))
