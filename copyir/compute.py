"""The prefix form of a computation, which streams keep: `(add (mul 2.0 $0)
1.0)`.

In the IR a computation is a region of `scalar` ops (`copy.compute`, see
`copyir.dialects.scalar` for the semantics and the dtype rules); a
`dma.compute` keeps it as this text, made once by the lowering
(`format_prefix`) and parsed once by whoever reads the stream
(`Compute.tree`). `$k` is the k-th operand (a box of the destination's
shape and dtype), numbers are literals that take the destination's dtype,
and the operations are the scalar ops' words, `add sub mul div max min
neg`. The same tree is what the authoring syntax reads and prints
(`format_infix`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from copyir.dialects.scalar import OPERATIONS, ConstantOp, UnaryOp, literal_value

INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_TOKEN = re.compile(r"\s*(?:(\()|(\))|(\$\d+)|([-+]?[0-9][0-9a-zA-Z_.+-]*)|([a-z]+))")


@dataclass(frozen=True)
class Operand:
    index: int


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class Apply:
    operation: str
    args: tuple[Expression, ...]


Expression = Operand | Literal | Apply


def parse_expression(text: str) -> Expression:
    """The expression of a prefix text; ValueError when it is not one."""
    tokens = []
    at = 0
    while at < len(text.rstrip()):
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise ValueError(f"unexpected {text[at : at + 10]!r} in {text!r}")
        tokens.append(match)
        at = match.end()
    expression, used = _parse(tokens, 0, text)
    if used != len(tokens):
        raise ValueError(f"trailing tokens in {text!r}")
    return expression


def _parse(tokens, at: int, text: str) -> tuple[Expression, int]:
    if at >= len(tokens):
        raise ValueError(f"{text!r} ends early")
    opening, _, operand, number, word = tokens[at].groups()
    if operand:
        return Operand(int(operand[1:])), at + 1
    if number or word in ("nan", "inf"):
        return Literal(number or word), at + 1
    if not opening or at + 1 >= len(tokens) or not tokens[at + 1].group(5):
        raise ValueError(f"malformed expression {text!r}")
    operation = tokens[at + 1].group(5)
    if operation not in OPERATIONS:
        raise ValueError(f"unknown operation {operation} in {text!r}")
    args, at = [], at + 2
    while at < len(tokens) and not tokens[at].group(2):
        arg, at = _parse(tokens, at, text)
        args.append(arg)
    if at >= len(tokens) or len(args) != arity(operation):
        raise ValueError(f"malformed expression {text!r}")
    return Apply(operation, tuple(args)), at + 1


def format_prefix(expression: Expression) -> str:
    if isinstance(expression, Operand):
        return f"${expression.index}"
    if isinstance(expression, Literal):
        return expression.text
    inner = " ".join(format_prefix(a) for a in expression.args)
    return f"({expression.operation} {inner})"


def format_infix(expression: Expression, names: Sequence[str], parent: int = 0) -> str:
    """The authoring syntax: `2.0 * xw + 1.0`, `max(a, b)`."""
    if isinstance(expression, Operand):
        return names[expression.index]
    if isinstance(expression, Literal):
        return expression.text
    operation, args = expression.operation, expression.args
    if operation in ("max", "min"):
        return f"{operation}({', '.join(format_infix(a, names) for a in args)})"
    if operation == "neg":  # -(2.0): the syntax reads -2.0 as one literal
        if isinstance(args[0], Literal):
            return f"-({args[0].text})"
        return f"-{format_infix(args[0], names, 3)}"
    level = 1 if operation in ("add", "sub") else 2
    text = (
        f"{format_infix(args[0], names, level)} {INFIX[operation]} "
        f"{format_infix(args[1], names, level + 1)}"
    )
    return f"({text})" if level < parent else text


def operands_used(expression: Expression) -> set[int]:
    if isinstance(expression, Operand):
        return {expression.index}
    if isinstance(expression, Literal):
        return set()
    return set().union(*(operands_used(a) for a in expression.args))


def arity(operation: str) -> int:
    return 1 if issubclass(OPERATIONS[operation], UnaryOp) else 2


def check_expression(expression: Expression, dtype, inputs: int) -> None:
    """The verifier's rules for a computation into `dtype` (a
    `copyir.dtypes.DType`) over `inputs` operands, each node's the scalar
    op's, checked outermost first as `copy.compute` checks its region:
    literals must fit the dtype, `/` is for floats, `-` not for bool; and
    operands must exist."""
    from copyir import errors
    from copyir.errors import CopyIRError

    for node in nodes(expression):
        if isinstance(node, Operand) and not 0 <= node.index < inputs:
            raise CopyIRError(
                errors.COMPUTE_MALFORMED.format(why=f"no operand ${node.index}")
            )
        if isinstance(node, Apply):
            OPERATIONS[node.operation].check_dtype(dtype)
        if isinstance(node, Literal):
            ConstantOp.check_literal(node.text, dtype)


def nodes(expression: Expression) -> Iterator[Expression]:
    """The expression and every expression inside it, outermost first."""
    yield expression
    if isinstance(expression, Apply):
        for arg in expression.args:
            yield from nodes(arg)


_UFUNCS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
    "neg": np.negative,
}


def compile_expression(
    expression: Expression, dtype: np.dtype
) -> Callable[[Sequence[np.ndarray]], np.ndarray]:
    """A function of the operand arrays that evaluates the expression, each
    operation in `dtype` (literals converted once)."""
    if isinstance(expression, Operand):
        index = expression.index
        return lambda operands: operands[index]
    if isinstance(expression, Literal):
        value = literal_value(expression.text, dtype)
        return lambda operands: value
    ufunc = _UFUNCS[expression.operation]
    args = [compile_expression(a, dtype) for a in expression.args]
    if len(args) == 1:
        (only,) = args
        return lambda operands: ufunc(only(operands))
    left, right = args  # both of `dtype`: numpy keeps it, and rounds per step
    return lambda operands: ufunc(left(operands), right(operands))
