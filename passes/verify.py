"""verify: check a copy program and report its first error, located.

One walk in program order: each op's operands must be defined before it
(xDSL's own verify does not check dominance), then the op's IRDL constraints
and its `verify_`. The first error wins and carries the op's location, so
a user sees one precise error at the line that caused it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from copyir import errors
from copyir.dialects.copy import KernelOp, describe, loc_of
from copyir.errors import CopyIRError


def verify(module: ModuleOp) -> None:
    """Raise the program's first error as a located `CopyIRError`."""
    kernels = list(module.ops)
    if not kernels:
        raise CopyIRError(errors.NO_KERNELS, loc_of(module.location))
    if any(block.args for block in module.body.blocks):
        raise CopyIRError(errors.MODULE_ARGUMENTS, loc_of(module.location))
    for kernel in kernels:
        if not isinstance(kernel, KernelOp):
            raise CopyIRError(
                errors.NOT_A_KERNEL.format(op=kernel.name), loc_of(kernel.location)
            )
        _verify_op(kernel, set())


def _verify_op(op: Operation, defined: set[SSAValue]) -> None:
    loc = loc_of(op.location)
    for operand in op.operands:
        if operand not in defined:
            raise CopyIRError(
                errors.USED_BEFORE_DEFINED.format(name=describe(operand)), loc
            )
    try:
        op.verify_()
    except VerifyException as err:
        raise CopyIRError(str(err), loc) from None
    except CopyIRError as err:
        raise err.at(loc) from None
    for region in op.regions:
        for block in region.blocks:
            inner = defined | set(block.args)
            for child in block.ops:
                if not child.name.startswith("copy.") or isinstance(child, KernelOp):
                    raise CopyIRError(
                        errors.NOT_IN_KERNEL.format(op=child.name),
                        loc_of(child.location),
                    )
                _verify_op(child, inner)
                inner.update(child.results)
    defined.update(op.results)


@dataclass(frozen=True)
class VerifyPass(ModulePass):
    """Check the program; report its first error at its line."""

    name = "verify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        verify(op)
