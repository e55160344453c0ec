"""Integers and booleans of a kernel's jaxpr: index expressions and
conditions (`symbols`), grid indices, Python's `%` and `//` as the
`jit`s `jnp.remainder` and `jnp.floor_divide` make of them, and
`jnp.minimum`/`jnp.maximum`/`jnp.clip`/`lax.clamp` of indices (a
`copy.index min` or `max`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.ir.affine import AffineExpr, AffineMap

from copyir import errors
from copyir.cpy.expressions import MAX_CONDITION_SETS, in_print_order
from copyir.dialects.copy import IndexOp
from copyir.errors import CopyIRError
from copyir.pallas.arrays import Arrays
from copyir.pallas.symbols import (
    Condition,
    Integer,
    TooManySets,
    as_condition,
    as_expr,
    compare,
    folded,
)
from copyir.pallas.values import Vector
from copyir.pallas.walker import Value, is_array, is_integer, known


class Integers(Arrays):
    """Index arithmetic, comparisons and logic, program ids."""

    def integer(self, eqn, args: list[Value]) -> Any:
        """`add`, `sub`, `mul`, `neg` of index values: affine expressions."""
        name = eqn.primitive.name
        if all(known(a) for a in args):
            return self.evaluate(eqn, args)
        if any(isinstance(a, Vector | float) for a in args):
            return self.vector(eqn, args)
        exprs = [as_expr(a) for a in args]
        if name == "neg":
            return folded(-exprs[0])
        if name == "mul" and not any(isinstance(a, int) for a in args):
            raise self.not_affine("*", args)
        result = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}[name](
            *exprs
        )
        return folded(result)

    def extremum(self, eqn, args: list[Value]) -> Any:
        """`min` and `max` (`jnp.minimum`, `jnp.maximum`, and `jnp.clip`'s
        jit of them) of index values, as kernels clamp their last block: a
        `copy.index min` (or max) of the two expressions, whose value is a
        new dimension of the importer's expressions (so that
        `jnp.minimum(i, 7) * 128` is affine in it). Of arrays: a
        computation."""
        if is_array(eqn) or any(isinstance(a, Vector | float) for a in args):
            return self.vector(eqn, args)
        if all(known(a) for a in args):
            return self.evaluate(eqn, args)
        return self.combined(eqn.primitive.name, args)

    def clamp(self, eqn, args: list[Value]) -> Any:
        """`lax.clamp(lo, x, hi)` of index values: `min(max(x, lo), hi)`."""
        if is_array(eqn) or any(isinstance(a, Vector | float) for a in args):
            return self.vector(eqn, args)
        if all(known(a) for a in args):
            return self.evaluate(eqn, args)
        lo, x, hi = args
        return self.combined("min", [self.combined("max", [x, lo]), hi])

    def combined(self, kind: str, args: Sequence[Value]) -> Integer:
        """A new `copy.index min` (or max) of the integers, as a dimension."""
        exprs, dims = in_print_order([as_expr(a) for a in args], self.dims)
        if None in dims:  # an index map's grid dimensions have no values
            raise self.unsupported(f"`jnp.{_JNP[kind]}` in an index map")
        index = IndexOp(AffineMap(len(dims), 0, tuple(exprs)), dims, combine=kind)
        return self.dim(self.emit(index).results[0])

    def division(self, kind: str, args: list[Value]) -> Integer:
        """`a // b` or `a % b` (Python's, as jnp's floor_divide and
        remainder are) for a positive constant b."""
        a, b = args
        if isinstance(a, int) and isinstance(b, int):
            return a // b if kind == "//" else a % b
        if not isinstance(b, int) or b < 1 or not isinstance(a, int | AffineExpr):
            raise self.not_affine(kind, args)
        expr = as_expr(a)
        result = expr // b if kind == "//" else expr % b
        return folded(result)

    def not_affine(self, op: str, args: Sequence[Value]) -> CopyIRError:
        texts = [self.text(a) if is_integer(a) else "a value" for a in args]
        return CopyIRError(
            errors.PALLAS_NOT_AFFINE.format(expr=f" {op} ".join(texts)), self.loc()
        )

    def comparison(self, eqn, args: list[Value]) -> Any:
        if all(known(a) for a in args):
            return self.evaluate(eqn, args)
        if not all(is_integer(a) for a in args):
            return self.vector(eqn, args)
        return self.condition(lambda: compare(eqn.primitive.name, *args))

    def logic(self, eqn, args: list[Value]) -> Any:
        if all(known(a) for a in args):
            return self.evaluate(eqn, args)
        if not all(isinstance(a, bool | Condition) for a in args):
            return self.vector(eqn, args)
        conditions = [as_condition(a) for a in args]
        name = eqn.primitive.name
        if name == "not":
            return self.condition(lambda: ~conditions[0])
        if name == "and":
            return self.condition(lambda: conditions[0] & conditions[1])
        if name == "or":
            return self.condition(lambda: conditions[0] | conditions[1])
        raise self.unsupported(f"`{name}` of conditions")

    def condition(self, make: Callable[[], bool | Condition]) -> bool | Condition:
        try:
            return make()
        except TooManySets as err:
            raise CopyIRError(
                errors.PALLAS_CONDITION_TOO_LARGE.format(
                    count=err.args[0], limit=MAX_CONDITION_SETS
                ),
                self.loc(),
            ) from None

    def convert(self, eqn, args: list[Value]) -> Any:
        (value,) = args
        if known(value):
            return self.evaluate(eqn, args)
        if isinstance(value, Condition) or is_integer(value):
            return value  # bool to int for `cond`, int32 to int32
        return self.vector(eqn, args)

    def hint(self, eqn, args: list[Value]) -> Any:
        """`pl.multiple_of(x, n)`: a promise to the compiler, the value
        itself (copyir's bounds are exact without it)."""
        (value,) = args
        return value

    def select(self, eqn, args: list[Value]) -> Any:
        which, *cases = args
        if isinstance(which, bool | int | np.integer | np.bool_):
            return cases[int(which)]
        if all(c is cases[0] for c in cases):
            return cases[0]
        if isinstance(which, Condition):
            raise self.unsupported("`select_n` on an index condition")
        return self.vector(eqn, args)

    def program_id(self, eqn, args: list[Value]) -> Integer:
        axis = eqn.params["axis"]
        if axis >= len(self.program_ids):
            raise self.unsupported(f"`program_id({axis})` outside the grid")
        return self.program_ids[axis]

    def num_programs(self, eqn, args: list[Value]) -> int:
        axis = eqn.params["axis"]
        if axis >= len(self.grid):
            raise self.unsupported(f"`num_programs({axis})` outside the grid")
        return self.grid[axis]


_JNP = {"min": "minimum", "max": "maximum"}
"""What a kernel calls the `min` and `max` primitives."""


def named_division(kind: str) -> Callable:
    def handle(importer: Integers, eqn, args: list[Value]) -> Any:
        if all(known(a) for a in args) or not all(is_integer(a) for a in args):
            return importer.run_closed(eqn.params["jaxpr"], args)
        return [importer.division(kind, args)]

    return handle
