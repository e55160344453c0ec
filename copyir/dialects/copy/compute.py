"""Computation: `copy.compute`, an elementwise expression of VMEM or SMEM
refs into another (`copyir.compute` parses and checks the expression)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    prop_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect

from copyir import errors
from copyir.errors import CopyIRError

from .base import (
    CopyOp,
    create_typed,
    describe,
    expect_ref,
    print_attributes_and_types,
)
from .types import RefType


@irdl_op_definition
class ComputeOp(CopyOp):
    """An elementwise computation into a ref of VMEM or SMEM:
    `copy.compute %yw = "(add (mul 2.0 $0) 1.0)" (%xw) : ...`, operand `$k`
    being the k-th input (see `copyir.compute`). Every input has the
    destination's shape and dtype; literals take its dtype."""

    name = "copy.compute"

    dst = operand_def(RefType)
    inputs = var_operand_def(RefType)
    expression = prop_def(StringAttr)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(self, dst: SSAValue, expression: str, inputs: Sequence[SSAValue]):
        """`dst[...] = expression`, in the prefix form of `copyir.compute`
        (`(add (mul 2.0 $0) 1.0)`), operand `$k` being `inputs[k]`."""
        super().__init__(
            operands=[dst, inputs], properties={"expression": StringAttr(expression)}
        )

    def written(self) -> tuple[SSAValue, ...]:
        return (self.dst,)

    def parsed(self):
        from copyir.compute import parse_expression

        return parse_expression(self.expression.data)

    def check(self) -> None:
        from copyir.compute import check_expression

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
        check_expression(self.expression.data, dst.dtype, len(inputs))

    @classmethod
    def parse(cls, parser: Parser) -> ComputeOp:
        dst = parser.parse_unresolved_operand()
        parser.parse_punctuation("=")
        properties = {"expression": StringAttr(parser.parse_str_literal())}
        inputs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        return create_typed(cls, parser, [dst, *inputs], properties)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.dst)
        printer.print_string(" = ")
        printer.print_string_literal(self.expression.data)
        printer.print_string(" (")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(")")
        print_attributes_and_types(printer, self)
