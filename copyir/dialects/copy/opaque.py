"""Opaque computation: `copy.opaque`, a computation copyir has no scalar
ops for (a Pallas kernel's `exp`, `dot_general`, reductions), kept only
as the refs it reads and the refs it writes."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import StringAttr, UnitAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect

from copyir import errors
from copyir.errors import CopyIRError

from .base import CopyOp, check_store, expect_ref
from .types import RefType


@irdl_op_definition
class OpaqueOp(CopyOp):
    """A computation whose values copyir does not know: it reads its
    `reads` and writes poison into its `writes`, at one instant, as a
    computation does.

        copy.opaque "exp" (%xw, %s) -> (%yw) : !copy.ref<8x128xf32, vmem>,
            !copy.ref<f32, smem> -> !copy.ref<8x128xf32, vmem>

    The DMA protocol is checked on those refs as on a computation's (a
    race with a DMA in flight, a read of memory nobody wrote); the poison
    it writes counts as written, may be copied on, and is reported where
    it ends in a kernel's output. `what` names the computation in messages
    (`"dot_general, exp"`). One that `keeps` leaves the bytes of its
    `writes` as they are, which count as its poison all the same: the
    padding of a block cut in a BufferedRef's slot, which keeps what the
    slot held (`passes/expand_windows.py`)."""

    name = "copy.opaque"

    what = prop_def(StringAttr)
    reads = var_operand_def(RefType)
    writes = var_operand_def(RefType)
    keeps = opt_prop_def(UnitAttr)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$what ` ` `(` $reads `)` `->` `(` $writes `)` attr-dict "
        "(`keeps` $keeps^)? `:` type($reads) `->` type($writes)"
    )

    def __init__(
        self,
        what: str,
        reads: Sequence[SSAValue],
        writes: Sequence[SSAValue],
        keeps: bool = False,
    ):
        """`what` computed from the refs `reads` into the refs `writes`
        (views allowed)."""
        properties: dict[str, Attribute] = {"what": StringAttr(what)}
        if keeps:
            properties["keeps"] = UnitAttr()
        super().__init__(operands=[reads, writes], properties=properties)

    def written(self) -> tuple[SSAValue, ...]:
        return tuple(self.writes)

    def check(self) -> None:
        """A computation's rules: it loads from VMEM and scalars from SMEM,
        and stores into VMEM arrays and SMEM scalars."""
        for value in self.reads:
            type = expect_ref("an opaque computation", "input", value)
            if type.space_name == "hbm":
                raise CopyIRError(errors.HBM_LOAD)
            if type.space_name == "smem" and type.get_shape():
                raise CopyIRError(errors.SMEM_LOAD)
        for value in self.writes:
            check_store(expect_ref("an opaque computation", "output", value))
