"""The `scalar` dialect: the operations of a computation, one op each.

A `copy.compute` holds a region of these, in the style of
`linalg.generic`: one block argument per input (an element of the
destination's dtype), one op per operation, and a `scalar.yield` of the
element it computes:

    ^bb0(%x: f32):
      %two = scalar.constant "2.0" : f32
      %0 = scalar.mul %two, %x : f32
      %one = scalar.constant "1.0" : f32
      %1 = scalar.add %0, %one : f32
      scalar.yield %1 : f32

Every operation is evaluated in its dtype and rounds as numpy and
ml_dtypes do (bfloat16 after every operation); integers wrap as numpy's do;
`max` and `min` propagate NaN as `np.maximum` and `np.minimum`. Each op's
verifier holds its dtype rule, with the documented message: `/` is for
floats, `-` is not for bool, a literal must fit its dtype. The stream's
prefix form (`copyir.compute`) names the same operations by their word,
`(add $0 1.0)` being `scalar.add`, and checks them through these classes.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import AnyFloatConstr, IntegerType, StringAttr
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from copyir import errors
from copyir.dtypes import BY_IR, DType
from copyir.errors import CopyIRError

ELEMENT_TYPE = base(IntegerType) | AnyFloatConstr
"""An integer or a float; `dtype_of` says which are copyir's dtypes."""


def floating(dtype: DType) -> bool:
    return not isinstance(dtype.ir, IntegerType)


def dtype_of(type: Attribute) -> DType:
    """The copyir dtype of an element type (`i7` is none)."""
    dtype = BY_IR.get(type)
    if dtype is None:
        raise VerifyException(f"{type} is not an element type of copyir")
    return dtype


class ScalarOp(IRDLOperation):
    """An operation of a computation, evaluated in its result's dtype."""

    result = result_def(ELEMENT_TYPE)

    @classmethod
    def word(cls) -> str:
        """The operation's word in the prefix form of `copyir.compute`:
        `add` for `scalar.add`."""
        return cls.name.removeprefix("scalar.")

    @classmethod
    def check_dtype(cls, dtype: DType) -> None:
        """Raise the documented error where the operation is not defined on
        `dtype`; most are defined on all."""

    def check(self) -> None:
        """The op's dtype rule (IRDL's checks of its shape aside, as
        `copy.compute` runs them once per shape)."""
        self.check_dtype(dtype_of(self.result.type))

    def verify_(self) -> None:
        self.check()


class UnaryOp(ScalarOp):
    """`%r = scalar.neg %a : f32`: operand and result of one dtype."""

    T: ClassVar = VarConstraint("T", ELEMENT_TYPE)

    operand = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "$operand attr-dict `:` type($result)"

    def __init__(self, operand: SSAValue):
        super().__init__(operands=[operand], result_types=[operand.type])


class BinaryOp(ScalarOp):
    """`%r = scalar.add %a, %b : f32`: operands and result of one dtype."""

    T: ClassVar = VarConstraint("T", ELEMENT_TYPE)

    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[lhs, rhs], result_types=[lhs.type])


def refuse_bool(dtype: DType) -> None:
    """numpy and JAX refuse `-` on bool (`-True` is not a bool)."""
    if dtype.name == "bool":
        raise CopyIRError(errors.COMPUTE_BOOL_MINUS)


@irdl_op_definition
class AddOp(BinaryOp):
    """`lhs + rhs`."""

    name = "scalar.add"


@irdl_op_definition
class SubOp(BinaryOp):
    """`lhs - rhs`; not on bool."""

    name = "scalar.sub"

    @classmethod
    def check_dtype(cls, dtype: DType) -> None:
        refuse_bool(dtype)


@irdl_op_definition
class MulOp(BinaryOp):
    """`lhs * rhs`."""

    name = "scalar.mul"


@irdl_op_definition
class DivOp(BinaryOp):
    """`lhs / rhs`, true division: for floats only (numpy's `/` on
    integers makes floats, which the destination cannot hold)."""

    name = "scalar.div"

    @classmethod
    def check_dtype(cls, dtype: DType) -> None:
        if not floating(dtype):
            raise CopyIRError(errors.COMPUTE_INT_DIVISION.format(dtype=dtype.name))


@irdl_op_definition
class MaxOp(BinaryOp):
    """`max(lhs, rhs)`, NaN if either is (`np.maximum`)."""

    name = "scalar.max"


@irdl_op_definition
class MinOp(BinaryOp):
    """`min(lhs, rhs)`, NaN if either is (`np.minimum`)."""

    name = "scalar.min"


@irdl_op_definition
class NegOp(UnaryOp):
    """`-operand`; not on bool."""

    name = "scalar.neg"

    @classmethod
    def check_dtype(cls, dtype: DType) -> None:
        refuse_bool(dtype)


@irdl_op_definition
class ConstantOp(ScalarOp):
    """A literal of the result's dtype: `scalar.constant "2.0" : f32`. The
    literal is kept as written (`1e3`, `nan`, `-2`), so that messages and the
    authoring syntax quote it verbatim; `literal_value` reads it."""

    name = "scalar.constant"

    literal = prop_def(StringAttr)

    traits = traits_def(Pure())

    assembly_format = "$literal attr-dict `:` type($result)"

    def __init__(self, literal: str, type: Attribute):
        super().__init__(
            properties={"literal": StringAttr(literal)}, result_types=[type]
        )

    @staticmethod
    @functools.lru_cache(maxsize=1024)
    def check_literal(text: str, dtype: DType) -> None:
        """Raise the documented error where the literal cannot be of
        `dtype`: a float literal for integers, a value out of range
        (remembered: programs repeat their literals)."""
        if is_float_literal(text) and not floating(dtype):
            raise CopyIRError(
                errors.COMPUTE_FLOAT_LITERAL.format(literal=text, dtype=dtype.name)
            )
        try:
            literal_value(text, dtype.numpy)
        except (ValueError, OverflowError):
            raise CopyIRError(
                errors.COMPUTE_LITERAL_RANGE.format(literal=text, dtype=dtype.name)
            ) from None

    def check(self) -> None:
        self.check_literal(self.literal.data, dtype_of(self.result.type))


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The element a computation stores: the last op of its region."""

    name = "scalar.yield"

    value = operand_def(ELEMENT_TYPE)

    traits = traits_def(IsTerminator(), Pure())

    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue):
        super().__init__(operands=[value])


OPERATIONS: dict[str, type[UnaryOp | BinaryOp]] = {
    op.word(): op for op in (AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, NegOp)
}
"""The operations by their word in the prefix form."""


def is_float_literal(text: str) -> bool:
    return any(c in text for c in ".eEn")  # 1.5, 1e3, nan, inf


def literal_value(text: str, dtype: np.dtype) -> np.ndarray:
    """The literal as a 0-d array of `dtype`; ValueError when it cannot be
    (a float literal for integers, an integer out of range)."""
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
        value = int(text)  # ValueError for a float literal (1.5, 1e3, nan)
        if dtype == np.bool_:
            low, high = 0, 1
        else:
            info = np.iinfo(dtype)
            low, high = int(info.min), int(info.max)
        if not low <= value <= high:
            raise ValueError("range")
        return np.asarray(value, dtype)
    with np.errstate(over="ignore"):  # an overflow is this ValueError
        value = np.asarray(float(text), dtype)
    if np.isinf(value) and "inf" not in text:
        raise ValueError("range")
    return value


Scalar = Dialect(
    "scalar",
    [AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, NegOp, ConstantOp, YieldOp],
    [],
)
