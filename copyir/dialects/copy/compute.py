"""Computation: `copy.compute`, an elementwise computation of VMEM or SMEM
refs into another, its operations a region of `scalar` ops."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import LocationAttr, NoneType, StringAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    region_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect
from xdsl.utils.exceptions import VerifyException

from copyir import errors
from copyir.compute import Apply, Expression, Literal, Operand
from copyir.dialects.scalar import OPERATIONS, ConstantOp, ScalarOp, YieldOp
from copyir.errors import CopyIRError
from copyir.pytree import MAX_DEPTH

from .base import (
    CopyOp,
    check_store,
    describe,
    expect_ref,
    print_attributes_and_types,
)
from .generic import verify_generic
from .types import RefType

MAX_OPERATIONS = 1 << 20
"""A computation's operations once its shared values are written out (the
stream's prefix form has no sharing), so that no region of a few ops can
stand for an expression of billions."""


@irdl_op_definition
class ComputeOp(CopyOp):
    """An elementwise computation into a ref of VMEM or SMEM, in the style
    of `linalg.generic`: its region takes one element of each input and
    yields the destination's, one `scalar` op per operation.

        copy.compute %yw (%xw) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
        ^bb0(%x: f32):
          %two = scalar.constant "2.0" : f32
          %0 = scalar.mul %two, %x : f32
          ...
          scalar.yield %1 : f32
        }

    Every input has the destination's shape and dtype; every value of the
    region has its dtype."""

    name = "copy.compute"

    dst = operand_def(RefType)
    inputs = var_operand_def(RefType)
    body = region_def("single_block")

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(
        self, dst: SSAValue, body: Region | Expression, inputs: Sequence[SSAValue]
    ):
        """`dst[...] = body`: a region of scalar ops, or an expression of
        `copyir.compute` (`Apply("add", (Operand(0), Literal("1.0")))`,
        operand `k` being `inputs[k]`) made into one."""
        if not isinstance(body, Region):
            body = body_of(body, element_type(dst), len(inputs))
        super().__init__(operands=[dst, inputs], regions=[body])

    def written(self) -> tuple[SSAValue, ...]:
        return (self.dst,)

    @property
    def yielded(self) -> SSAValue:
        """The element the region yields; ValueError where it does not end
        with a `scalar.yield` (the verifier reports that)."""
        terminator = self.body.block.last_op
        if not isinstance(terminator, YieldOp) or len(terminator.operands) != 1:
            raise ValueError("a computation's region ends with no scalar.yield")
        return terminator.value

    def expression(self) -> Expression:
        """The region as an expression tree (shared values written out), as
        the authoring syntax and the stream's prefix form write it;
        ValueError where the region is not one (the verifier says why)."""
        block = self.body.block
        _check_size(list(block.ops))  # bounds the tree and its recursion
        inputs: dict[SSAValue, Expression] = {
            arg: Operand(k) for k, arg in enumerate(block.args)
        }

        def tree(value: SSAValue) -> Expression:
            if value in inputs:
                return inputs[value]
            op = value.owner
            if isinstance(op, ConstantOp):
                return Literal(op.literal.data)
            if not isinstance(op, ScalarOp) or op.parent_block() is not block:
                raise ValueError(f"a computation's region uses {describe(value)}")
            return Apply(op.word(), tuple(tree(v) for v in op.operands))

        return tree(self.yielded)

    def check(self) -> None:
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
        check_store(dst)
        self.check_body(dst)

    def check_body(self, dst: RefType) -> None:
        """The region: one argument per input and a value per op, each of
        the destination's dtype, defined before its use, scalar ops ending
        with one yield; then each op's own verifier, outermost first as the
        expression reads, so that of two mistakes the one a reader meets
        first is reported."""
        block = self.body.block
        if len(block.args) != len(self.inputs):
            raise CopyIRError(
                errors.COMPUTE_REGION_ARGUMENTS.format(
                    inputs=len(self.inputs), args=len(block.args)
                )
            )
        ops = list(block.ops)
        if not ops or not isinstance(ops[-1], YieldOp):
            raise CopyIRError(
                errors.COMPUTE_REGION_OP.format(
                    op=ops[-1].name if ops else "an empty block"
                )
            )
        defined: set[SSAValue] = set(block.args)
        for op in ops:
            if not isinstance(op, ScalarOp) and op is not ops[-1]:
                raise CopyIRError(errors.COMPUTE_REGION_OP.format(op=op.name))
            for operand in op.operands:
                if operand in defined:
                    continue
                if _defining_block(operand) is not block:
                    raise CopyIRError(
                        errors.COMPUTE_REGION_OUTSIDE.format(name=describe(operand))
                    )
                raise CopyIRError(
                    errors.USED_BEFORE_DEFINED.format(name=describe(operand))
                )
            defined.update(op.results)
        for value in (*block.args, *(r for op in ops for r in op.results)):
            if value.type != dst.element_type:
                raise CopyIRError(
                    errors.COMPUTE_REGION_TYPE.format(
                        dtype=dst.dtype.name, type=value.type
                    )
                )
        _check_size(ops)
        try:
            _verify_each(ops)
        except (CopyIRError, VerifyException):
            _verify_each(_outermost_first(ops))  # the error a reader meets first
            raise

    @classmethod
    def parse(cls, parser: Parser) -> ComputeOp:
        dst = parser.parse_unresolved_operand()
        inputs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        types = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_type
        )
        body = parser.parse_region()
        # Resolved once the region is parsed: a forward reference resolved
        # inside it would leave this op holding the placeholder.
        operands = parser.resolve_operands([dst, *inputs], types, pos)
        return cls.create(operands=operands, attributes=attributes, regions=[body])

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.dst)
        printer.print_string(" (")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(")")
        print_attributes_and_types(printer, self)
        printer.print_string(" ")
        printer.print_region(self.body)


def element_type(dst: SSAValue) -> Attribute:
    """The destination's element type, in which the region computes; none
    where it is not a ref (the op's check reports that first)."""
    return dst.type.element_type if isinstance(dst.type, RefType) else NoneType()


def body_of(
    expression: Expression,
    element: Attribute,
    inputs: int,
    location: LocationAttr | None = None,
) -> Region:
    """The region of an expression tree: its operands the block's
    arguments, one op per operation and literal, arguments first; every op
    at `location` (the statement's) when given. Made with `create`, as the
    parsers make ops: the verifier checks them."""
    block = Block(arg_types=[element] * inputs)

    def value(node: Expression) -> SSAValue:
        if isinstance(node, Operand):
            return block.args[node.index]
        if isinstance(node, Literal):
            literal = {"literal": StringAttr(node.text)}
            op = ConstantOp.create(properties=literal, result_types=[element])
        else:
            operands = [value(a) for a in node.args]
            op = OPERATIONS[node.operation].create(
                operands=operands, result_types=[element]
            )
        block.add_op(op)
        return op.results[0]

    block.add_op(YieldOp.create(operands=[value(expression)]))
    if location is not None:
        for op in block.ops:
            op.location = location
    return Region(block)


def _verify_each(ops: Sequence[Operation]) -> None:
    """IRDL's checks of each op's shape, then its dtype rule."""
    for op in ops:
        assert isinstance(op, IRDLOperation)  # check_body has seen to it
        verify_generic(op)
        if isinstance(op, ScalarOp):
            op.check()


def _defining_block(value: SSAValue) -> Block | None:
    owner = value.owner
    return owner if isinstance(owner, Block) else owner.parent_block()


def _check_size(ops: Sequence[Operation]) -> None:
    """The expression the region stands for, written out, is at most
    MAX_DEPTH deep and MAX_OPERATIONS large (one pass, ops in order)."""
    depth: dict[SSAValue, int] = {}
    size: dict[SSAValue, int] = {}
    for op in ops:
        op_depth = 1 + max((depth.get(v, 0) for v in op.operands), default=0)
        op_size = 1 + sum(size.get(v, 1) for v in op.operands)
        if op_depth > MAX_DEPTH:
            raise CopyIRError(errors.NESTED_TOO_DEEP.format(limit=MAX_DEPTH))
        if op_size > MAX_OPERATIONS:
            raise CopyIRError(
                errors.COMPUTE_TOO_LARGE.format(count=op_size, limit=MAX_OPERATIONS)
            )
        for result in op.results:
            depth[result], size[result] = op_depth, op_size


def _outermost_first(ops: Sequence[Operation]) -> list[Operation]:
    """The region's ops from the yield down, each before its operands, left
    operand first (an expression's pre-order); then any op the yield does
    not use."""
    order: list[Operation] = [ops[-1]]
    seen: set[Operation] = set(order)
    stack = list(reversed(ops[-1].operands))
    while stack:
        op = stack.pop().owner
        if isinstance(op, Operation) and op not in seen:
            seen.add(op)
            order.append(op)
            stack.extend(reversed(op.operands))
    order.extend(op for op in ops if op not in seen)
    return order
