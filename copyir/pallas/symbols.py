"""Integers and conditions of a kernel's jaxpr, as copyir's index
expressions and `when` conditions.

A kernel computes its indices with jaxpr equations (`add`, `mul`, the
`remainder` and `floor_divide` of `%` and `//`, comparisons, `and`, ...).
Each integer value the importer meets is a Python `int` where it is known,
or an `AffineExpr` over the importer's index values (loop and grid
indices, `Dims`). Each boolean is a `bool`, or a `Condition`: an or of
ands of affine constraints, the form `copy.when` takes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import SSAValue
from xdsl.ir.affine import (
    AffineConstantExpr,
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineSet,
)

from copyir.cpy.expressions import MAX_CONDITION_SETS, in_print_order
from copyir.index import comparison

Integer = int | AffineExpr
"""A jaxpr integer: known, or affine in the index values."""

Conjunction = tuple[AffineConstraintExpr, ...]


@dataclass(frozen=True)
class Condition:
    """A boolean over index values: an or of conjunctions (MLIR's integer
    sets, one per conjunction)."""

    sets: tuple[Conjunction, ...]

    def __and__(self, other: Condition) -> Condition:
        return Condition(_limited(tuple(a + b for a in self.sets for b in other.sets)))

    def __or__(self, other: Condition) -> Condition:
        return Condition(_limited(self.sets + other.sets))

    def __invert__(self) -> Condition:
        """not (a or b) is (not a) and (not b); each `not` of a conjunction
        is the or of its constraints negated."""
        result = Condition(((),))
        for conjunction in self.sets:
            negated = tuple(c for k in conjunction for c in _negate(k))
            result = result & Condition(tuple((c,) for c in negated))
        return result


class TooManySets(ValueError):
    """A condition with more conjunctions than copy.when takes."""


def _limited(sets: tuple[Conjunction, ...]) -> tuple[Conjunction, ...]:
    if len(sets) > MAX_CONDITION_SETS:
        raise TooManySets(len(sets))
    return sets


def _negate(constraint: AffineConstraintExpr) -> list[AffineConstraintExpr]:
    """`e >= 0` is false where `-e - 1 >= 0`; `e == 0` where `e` is above
    or below 0."""
    e, zero = constraint.lhs - constraint.rhs, AffineConstantExpr(0)
    ge = AffineConstraintKind.ge
    if constraint.kind == AffineConstraintKind.eq:
        return [
            AffineConstraintExpr(ge, e - 1, zero),
            AffineConstraintExpr(ge, -e - 1, zero),
        ]
    return [AffineConstraintExpr(ge, -e - 1, zero)]


COMPARISONS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
"""jaxpr's comparison primitives, as the authoring syntax writes them."""


def compare(primitive: str, a: Integer, b: Integer) -> Condition:
    """`a < b` (and the others) over index values; comparisons of known
    integers the importer leaves to JAX."""
    op = COMPARISONS[primitive]
    lhs, rhs = as_expr(a), as_expr(b)
    return Condition(tuple(tuple(c) for c in comparison(op, lhs, rhs)))


def as_expr(value: Integer) -> AffineExpr:
    return AffineConstantExpr(value) if isinstance(value, int) else value


def as_condition(value: bool | Condition) -> Condition:
    """A known bool as the condition that always or never holds."""
    if isinstance(value, Condition):
        return value
    return Condition(((),)) if value else Condition(())


def folded(expr: AffineExpr) -> Integer:
    """An int where the expression is a constant (xDSL's operators fold
    constants as they build). Nothing else is rewritten: the printer shows
    `i % 2` as the kernel wrote it."""
    return expr.value if isinstance(expr, AffineConstantExpr) else expr


def difference(a: Integer, b: Integer, dims: int) -> Integer:
    """`a - b` simplified, so that `(i + 16) - (i + 1)` is 15."""
    expr = as_expr(a) - as_expr(b)
    with contextlib.suppress(Exception):  # xDSL refuses some forms; keep them
        expr = expr.simplify(dims, 0)
    return folded(expr)


def local_sets(
    condition: Condition, dims: Sequence[SSAValue]
) -> tuple[list[AffineSet], list[SSAValue]]:
    """The condition's sets over only the index values it names, in the
    order it names them, as `copy.when` takes them."""
    flat = [e for conj in condition.sets for k in conj for e in (k.lhs, k.rhs)]
    exprs, used = in_print_order(flat, dims)
    sets, at = [], 0
    for conjunction in condition.sets:
        constraints = []
        for k in conjunction:
            constraints.append(AffineConstraintExpr(k.kind, exprs[at], exprs[at + 1]))
            at += 2
        sets.append(AffineSet(len(used), 0, tuple(constraints)))
    return sets, used


__all__ = [
    "COMPARISONS",
    "Condition",
    "Integer",
    "TooManySets",
    "as_condition",
    "as_expr",
    "compare",
    "difference",
    "folded",
    "local_sets",
]
