"""Index expressions: xDSL's affine expressions, evaluated over loop domains.

An index (a view start, a block index, a slot, a semaphore index) is an
`AffineExpr` of the enclosing loops' indices, d0 the outermost; a condition
(`when`, an instruction's predicate) is an `or` of `AffineSet`s. Here they
are evaluated for many iterations at once, with numpy, and printed in the
authoring syntax (`8 * i + 8`, `(i + 1) % 2`, `i // 4`).

An index may also be the `min` or `max` of affine ones (`copy.index min`,
as kernels clamp their last block: `min(128 * i, 872)`), which is not
affine; it is `Pieces`, affine on each piece of the loop domain (see
there), so that every check and the lowering stay exact.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import cast

import numpy as np
from xdsl.dialects.builtin import ShapedType
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineDimExpr,
    AffineExpr,
    AffineSet,
)

from copyir import errors, limits
from copyir.errors import CopyIRError

INT64 = range(-(2**63), 2**63)
"""The integers an index or a constant in one may take (numpy's int64)."""


def row_major_strides(shape: Sequence[int], factor: int = 1) -> tuple[int, ...]:
    """xDSL's `strides_for_shape` of a static shape: every stride is known
    (xDSL's None stands for one after a dynamic size)."""
    return cast(tuple[int, ...], ShapedType.strides_for_shape(shape, factor))


def constant_out_of_range(exprs: Iterable[AffineExpr]) -> int | None:
    """The first constant in the expressions that does not fit in 64 bits,
    which `evaluate` could not take; None when all fit."""
    for expr in exprs:
        for node in expr.dfs():
            if isinstance(node, AffineConstantExpr) and node.value not in INT64:
                return node.value
    return None


MAX_DEPTH = 100
"""Operations an index expression may nest: deeper ones (no program writes
them; a mutated one does) would exhaust Python's recursion in xDSL's
hashing and printing."""


def too_deep(exprs: Iterable[AffineExpr]) -> int | None:
    """The depth of the first expression nested deeper than `MAX_DEPTH`,
    measured without recursion; None when all are shallow enough."""
    for expr in exprs:
        stack = [(expr, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_DEPTH:
                return depth
            if isinstance(node, AffineBinaryOpExpr):
                stack += [(node.lhs, depth + 1), (node.rhs, depth + 1)]
    return None


def grid_points(trips: Sequence[int], flat: np.ndarray | None = None) -> np.ndarray:
    """(len(trips), points): the indices of points of a row-major grid (the
    last index fastest), at the flat positions `flat` (all of them by
    default). `np.indices` and `np.unravel_index` refuse more than 32 or 64
    dimensions; this has no such limit (a grid of 70 dimensions of 1 is a
    valid program)."""
    if flat is None:
        flat = np.arange(math.prod(trips), dtype=np.int64)
    points = np.empty((len(trips), len(flat)), np.int64)
    rest = flat
    for d in reversed(range(len(trips))):
        rest, points[d] = np.divmod(rest, trips[d])
    return points


FAST = 1 << 62
"""The magnitude below which every intermediate value of an expression must
stay for it to be evaluated in int64: with this room, a value plus a size or
minus another value does not wrap either."""

Dims = Sequence[np.ndarray] | Mapping[int, np.ndarray]
"""Each dimension's values at the points (arrays of one shape), indexed by
dimension number."""


def evaluate(expr: AffineExpr | Pieces, dims: Dims) -> np.ndarray:
    """The expression's exact value at every point; mod and floordiv as MLIR
    defines them for a positive divisor, which are Python's. In int64 when
    the dimensions' ranges prove that no intermediate value wraps (see
    FAST), else in Python integers (an object array), so that an index or a
    condition is never judged on a value the program does not compute.
    `Pieces` take each piece's value where its constraints hold."""
    if isinstance(expr, Pieces):
        return expr.evaluate(dims)
    exact = bounds_over(expr, _ranges(dims), FAST) is None
    return _evaluate(expr, dims, object if exact else np.int64)


def _shape(dims: Dims) -> tuple[int, ...]:
    values = list(dims.values()) if isinstance(dims, Mapping) else dims
    return np.shape(values[0]) if len(values) else ()


def _ranges(dims: Dims) -> Callable[[int], tuple[int, int]]:
    """Each dimension's least and greatest value at the points, found when
    first asked for."""
    found: dict[int, tuple[int, int]] = {}

    def range_of(position: int) -> tuple[int, int]:
        if position not in found:
            values = np.asarray(dims[position])
            found[position] = (
                (int(values.min()), int(values.max())) if values.size else (0, 0)
            )
        return found[position]

    return range_of


def _evaluate(expr: AffineExpr, dims: Dims, dtype) -> np.ndarray:
    if isinstance(expr, AffineConstantExpr):
        return np.full(_shape(dims), expr.value, dtype)
    if isinstance(expr, AffineDimExpr):
        return np.asarray(dims[expr.position], dtype)
    if not isinstance(expr, AffineBinaryOpExpr):
        raise ValueError(f"unsupported index expression {expr}")
    lhs, rhs = _evaluate(expr.lhs, dims, dtype), _evaluate(expr.rhs, dims, dtype)
    kind = expr.kind
    if kind == AffineBinaryOpKind.Add:
        return lhs + rhs
    if kind == AffineBinaryOpKind.Mul:
        return lhs * rhs
    if kind == AffineBinaryOpKind.Mod:
        return np.mod(lhs, rhs)
    if kind == AffineBinaryOpKind.FloorDiv:
        return np.floor_divide(lhs, rhs)
    return -np.floor_divide(-lhs, rhs)  # CeilDiv


def bounds(
    expr: AffineExpr, extents: Sequence[int], limit: int | None = None
) -> tuple[int, int] | None:
    """The least and greatest values the expression takes with dimension k
    in [0, extents[k]) (a dimension past them: 0), as Python integers
    (exact, however large); None if it divides by zero or by a
    non-constant, or if a part of it reaches `limit` in magnitude (a
    divisor is no part: it is never added or multiplied)."""

    def range_of(position: int) -> tuple[int, int]:
        size = extents[position] if position < len(extents) else 1
        return 0, max(size - 1, 0)

    return bounds_over(expr, range_of, limit)


def bounds_over(
    expr: AffineExpr | Pieces,
    ranges: Callable[[int], tuple[int, int]],
    limit: int | None = None,
) -> tuple[int, int] | None:
    """`bounds` with each dimension in its own range, `ranges(position)`
    (for `Pieces`, the bounds of all the pieces: each piece's over the
    whole ranges, not only where it holds)."""
    if isinstance(expr, Pieces):
        found = [bounds_over(e, ranges, limit) for _, e in expr.pieces]
        if any(f is None for f in found):
            return None
        ends = cast(list[tuple[int, int]], found)
        return min(lo for lo, _ in ends), max(hi for _, hi in ends)
    found = _bounds(expr, ranges, limit)
    if found is None or (limit is not None and max(map(abs, found)) >= limit):
        return None
    return found


def _bounds(expr: AffineExpr, ranges, limit: int | None):
    if isinstance(expr, AffineConstantExpr):
        return expr.value, expr.value
    if isinstance(expr, AffineDimExpr):
        return ranges(expr.position)
    if not isinstance(expr, AffineBinaryOpExpr):
        return None
    lhs = bounds_over(expr.lhs, ranges, limit)
    kind = expr.kind
    if kind in (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul):
        rhs = bounds_over(expr.rhs, ranges, limit)
    else:
        rhs = bounds_over(
            expr.rhs,
            ranges,
            None if isinstance(expr.rhs, AffineConstantExpr) else limit,
        )
    if lhs is None or rhs is None:
        return None
    if kind == AffineBinaryOpKind.Add:
        return lhs[0] + rhs[0], lhs[1] + rhs[1]
    if kind == AffineBinaryOpKind.Mul:
        products = [a * b for a in lhs for b in rhs]
        return min(products), max(products)
    if rhs[0] != rhs[1] or rhs[0] == 0 or rhs[0] not in INT64:
        return None  # mod and divisions: by a constant that numpy holds
    divisor = rhs[0]
    if kind == AffineBinaryOpKind.Mod:
        if divisor > 0 and lhs[0] >= 0 and lhs[1] < divisor:
            return lhs  # no wrap: x % d is x
        return (0, divisor - 1) if divisor > 0 else (divisor + 1, 0)
    if kind == AffineBinaryOpKind.FloorDiv:
        ends = [lhs[0] // divisor, lhs[1] // divisor]
    else:
        ends = [-(-lhs[0] // divisor), -(-lhs[1] // divisor)]
    return min(ends), max(ends)


def divides_by_zero(exprs: Iterable[AffineExpr]) -> bool:
    """Whether a `mod`, `floordiv` or `ceildiv` in the expressions divides
    by zero, which has no value (MLIR leaves it undefined)."""
    return any(
        isinstance(node, AffineBinaryOpExpr)
        and node.kind != AffineBinaryOpKind.Add
        and node.kind != AffineBinaryOpKind.Mul
        and node.rhs == AffineConstantExpr(0)
        for expr in exprs
        for node in expr.dfs()
    )


def substitute(
    affine_set: AffineSet, args: Sequence[AffineExpr], num_dims: int | None = None
) -> AffineSet:
    """The set with dimension k replaced by `args[k]` (a `when`'s condition
    over its operands as one over loop dimensions). It has `num_dims`
    dimensions, else as many as the args use; constraints stay as written."""
    if num_dims is None:
        dims = (e for a in args for e in a.dfs() if isinstance(e, AffineDimExpr))
        num_dims = 1 + max((e.position for e in dims), default=-1)
    return AffineSet(
        num_dims,
        0,
        tuple(
            AffineConstraintExpr(
                c.kind,
                c.lhs.replace_dims_and_symbols(args, []),
                c.rhs.replace_dims_and_symbols(args, []),
                canonicalize=False,
            )
            for c in affine_set.constraints
        ),
    )


def substitute_sets(
    sets: Sequence[AffineSet], args: Sequence[AffineExpr | Pieces]
) -> tuple[AffineSet, ...]:
    """`substitute` of an `or` of sets, for args that may be pieces: each
    set on each combination of the args' pieces, their constraints added
    (`min(i, 3) >= 2` is `i <= 3 and i >= 2 or i > 3 and 3 >= 2`)."""
    if not any(isinstance(a, Pieces) for a in args):
        return tuple(substitute(s, cast(Sequence[AffineExpr], args)) for s in sets)
    result = []
    for affine_set in sets:
        for where, exprs in combinations(args):
            inner = substitute(affine_set, exprs).constraints
            joined = conjoin(where, inner)
            if joined is not None:
                result.append(_set_of(joined))
                _within_limit(result)
    return tuple(result)


def _set_of(constraints: Conjunction) -> AffineSet:
    """A set of these constraints over the dimensions they use."""
    return AffineSet(1 + max(used_dims(constraints), default=-1), 0, constraints)


def used_dims(constraints: Iterable[AffineConstraintExpr]) -> list[int]:
    """The dimensions the constraints use, in order."""
    sides = (e for c in constraints for e in (c.lhs, c.rhs))
    return sorted({d for e in sides for d in e.used_dims()})


def renumbered(expr: AffineExpr, dims: Sequence[int]) -> AffineExpr:
    """The expression with dimension `dims[k]` as dimension k: an op's
    expression over the loop indices it takes as operands, in order."""
    new = [AffineExpr.constant(0)] * (1 + max(dims, default=-1))
    for k, d in enumerate(dims):
        new[d] = AffineExpr.dimension(k)
    return expr.replace_dims_and_symbols(new, [])


def renumbered_set(
    constraints: Iterable[AffineConstraintExpr], dims: Sequence[int]
) -> AffineSet:
    """A set of the constraints over `dims`, dimension `dims[k]` its
    dimension k (see `renumbered`)."""
    return AffineSet(
        len(dims),
        0,
        tuple(
            AffineConstraintExpr(
                c.kind,
                renumbered(c.lhs, dims),
                renumbered(c.rhs, dims),
                canonicalize=False,
            )
            for c in constraints
        ),
    )


def holds(sets: Sequence[AffineSet], dims: Dims) -> np.ndarray:
    """Where any of the sets holds (each a conjunction of constraints),
    exactly: the two sides are compared, never subtracted."""
    result = np.zeros(_shape(dims), bool)
    for affine_set in sets:
        result |= satisfied(affine_set.constraints, dims)
    return result


def satisfied(constraints: Iterable[AffineConstraintExpr], dims: Dims) -> np.ndarray:
    """Where every constraint holds."""
    inside = np.ones(_shape(dims), bool)
    for constraint in constraints:
        lhs = evaluate(constraint.lhs, dims)
        rhs = evaluate(constraint.rhs, dims)
        if constraint.kind == AffineConstraintKind.ge:
            inside &= lhs >= rhs
        elif constraint.kind == AffineConstraintKind.le:
            inside &= lhs <= rhs
        else:
            inside &= lhs == rhs
    return inside


# -- min and max: affine pieces -----------------------------------------------------

Conjunction = tuple[AffineConstraintExpr, ...]
"""Constraints that hold together (`e >= 0` or `e == 0`, as `comparison`
makes them)."""


@dataclass(frozen=True)
class Pieces:
    """An index affine on each piece of the loop domain: `min` and `max`.

    `min(a, b)` of affine a and b is not affine, but it is `a` where
    `a <= b` and `b` where `a > b`: two affine expressions, each over the
    part of the domain that an affine constraint cuts out (`max` is `a`
    where `a >= b`). A piece is `(where, expr)`, a conjunction of such
    constraints and the expression that holds there; the pieces of one
    index partition the domain, so that exactly one gives its value at
    every point. Everything affine on indices applies piece by piece
    (`a + min(b, c)`, a `copy.index` of a min, a view's offset and box),
    and a min of pieces splits each further (`min(max(a, b), c)`: the
    pieces multiply), the combinations of pieces that cannot hold together
    (`a <= b` and `a > b`, from one min met twice) dropped
    (`combinations`), and at most `limits.MAX_PIECES` of them.

    So nothing downstream meets a min: the verifier evaluates pieces at
    every point of an op's domain (exact bounds, overlaps and slots, the
    first failing point named), and the lowering (`expand-min-max`) gives
    each op that reads one a copy per piece under a `copy.when` of the
    piece's constraints, with the piece's affine indices: the stream has an
    instruction per piece and predicate, O(program), and the protocol's
    bounds and races see exact affine accesses on exact sub-domains.
    """

    pieces: tuple[tuple[Conjunction, AffineExpr], ...]

    @staticmethod
    def of(value: int | AffineExpr | Pieces) -> Pieces:
        if isinstance(value, Pieces):
            return value
        if isinstance(value, int):
            value = AffineConstantExpr(value)
        return Pieces((((), value),))

    def evaluate(self, dims: Dims) -> np.ndarray:
        """The value of the piece that holds, at each point."""
        (*rest, (_, last)) = self.pieces
        result = evaluate(last, dims)
        for where, expr in reversed(rest):
            result = np.where(satisfied(where, dims), evaluate(expr, dims), result)
        return result

    def __add__(self, other: int | AffineExpr | Pieces) -> AffineExpr | Pieces:
        return apply(lambda a, b: a + b, [self, other])

    __radd__ = __add__

    def __mul__(self, other: int) -> AffineExpr | Pieces:
        return apply(lambda a: a * other, [self])

    __rmul__ = __mul__


Index = int | AffineExpr | Pieces
"""An index over loop dimensions: constant, affine, or affine in pieces."""


def plus(a: Index, b: Index) -> Index:
    """`a + b`, whichever of them are pieces (xDSL's `+` takes no pieces)."""
    if isinstance(a, Pieces) or isinstance(b, Pieces):
        return apply(lambda x, y: x + y, [a, b])
    return a + b


def apply(
    function: Callable[..., AffineExpr], args: Sequence[Index]
) -> AffineExpr | Pieces:
    """An affine function of indices, piece by piece: on every combination
    of the args' pieces that can hold together. One piece without
    constraints is its expression."""
    return _simplest([(where, function(*exprs)) for where, exprs in combinations(args)])


def _simplest(pieces: Sequence[tuple[Conjunction, AffineExpr]]) -> AffineExpr | Pieces:
    """The pieces, or the expression of the one piece without constraints."""
    if len(pieces) == 1 and not pieces[0][0]:
        return pieces[0][1]
    return Pieces(tuple(pieces))


def combinations(
    args: Sequence[Index],
) -> list[tuple[Conjunction, tuple[AffineExpr, ...]]]:
    """The combinations of the args' pieces that can hold together, each
    as its constraints and each arg's expression there: the pieces of
    anything computed from the args (an op reading several mins is a copy
    per combination). Made arg by arg, those that cannot hold dropped as
    they are met, so that the work stays within `limits.MAX_PIECES`."""
    found: list[tuple[Conjunction, tuple[AffineExpr, ...]]] = [((), ())]
    for arg in args:
        grown = []
        for where, exprs in found:
            for constraints, expr in Pieces.of(arg).pieces:
                joined = conjoin(where, constraints)
                if joined is not None:
                    grown.append((joined, (*exprs, expr)))
                    _within_limit(grown)
        found = grown
    return found


def _within_limit(pieces: Sized) -> None:
    """TOO_MANY_PIECES past `limits.MAX_PIECES`, before the work grows."""
    if len(pieces) > limits.MAX_PIECES:
        raise CopyIRError(errors.TOO_MANY_PIECES.format(limit=limits.MAX_PIECES))


def substitute_expr(expr: AffineExpr, args: Sequence[Index]) -> AffineExpr | Pieces:
    """The expression with dimension k replaced by `args[k]`, piece by
    piece of the args it uses only."""
    used = expr.used_dims()
    args = [a if k in used else _UNUSED for k, a in enumerate(args)]
    if not any(isinstance(a, Pieces | int) for a in args):
        return expr.replace_dims_and_symbols(cast(Sequence[AffineExpr], args), [])
    return apply(lambda *exprs: expr.replace_dims_and_symbols(exprs, []), args)


_UNUSED = AffineConstantExpr(0)
"""What stands for an argument an expression does not use."""


MIN, MAX = "min", "max"


def combine(kind: str, args: Sequence[Index]) -> AffineExpr | Pieces:
    """`min` or `max` of the args, left to right: each pair is the first
    where it is the smaller (the larger for max) or equal, the second
    elsewhere."""
    first = "<=" if kind == MIN else ">="
    result: Index = args[0]
    for arg in args[1:]:
        pieces = []
        for a, b in itertools.product(Pieces.of(result).pieces, Pieces.of(arg).pieces):
            for op, value in ((first, a[1]), (NEGATED[first], b[1])):
                (split,) = comparison(op, a[1], b[1])
                where = conjoin(a[0], b[0], split)
                if where is not None:
                    pieces.append((where, value))
                    _within_limit(pieces)
        result = _simplest(pieces)
    return cast(AffineExpr | Pieces, result)


def conjoin(*parts: Conjunction) -> Conjunction | None:
    """The constraints of all parts, each once and the ones true everywhere
    left out; None when two of them (or one) hold nowhere, as `a <= b` and
    `a > b` do (their sum is a negative constant)."""
    kept: list[AffineConstraintExpr] = []
    for constraint in itertools.chain(*parts):
        if constraint in kept:
            continue
        value = _constant(constraint.lhs - constraint.rhs)
        if value is not None:
            if not _HOLDS[constraint.kind](value):
                return None
            continue
        for other in kept:
            if _contradict(constraint, other):
                return None
        kept.append(constraint)
    return tuple(kept)


_HOLDS = {
    AffineConstraintKind.ge: lambda difference: difference >= 0,
    AffineConstraintKind.le: lambda difference: difference <= 0,
    AffineConstraintKind.eq: lambda difference: difference == 0,
}
"""Whether a constraint holds, by the difference of its two sides."""


@functools.lru_cache(maxsize=1 << 16)
def _contradict(a: AffineConstraintExpr, b: AffineConstraintExpr) -> bool:
    ge = AffineConstraintKind.ge
    if a.kind != ge or b.kind != ge:
        return False
    total = _constant(a.lhs - a.rhs + (b.lhs - b.rhs))
    return total is not None and total < 0


@functools.lru_cache(maxsize=1 << 16)
def _constant(expr: AffineExpr) -> int | None:
    """The expression's value when it is the same everywhere (as far as
    xDSL's flattening sees)."""
    if isinstance(expr, AffineConstantExpr):
        return expr.value
    dims = 1 + max(expr.used_dims(), default=-1)
    try:
        flat = expr.simplify(dims, 0)
    except (NotImplementedError, ValueError, ZeroDivisionError):
        return None
    return flat.value if isinstance(flat, AffineConstantExpr) else None


# -- printing in the authoring syntax ---------------------------------------------

_SYMBOLS = {
    AffineBinaryOpKind.Add: ("+", 1),
    AffineBinaryOpKind.Mul: ("*", 2),
    AffineBinaryOpKind.FloorDiv: ("//", 2),
    AffineBinaryOpKind.CeilDiv: ("ceildiv", 2),
    AffineBinaryOpKind.Mod: ("%", 2),
}


def format_expr(expr: AffineExpr, names: Sequence[str], parent: int = 0) -> str:
    """`8 * i + 8` for `d0 * 8 + 8` with d0 named i."""
    if isinstance(expr, AffineConstantExpr):
        text = str(expr.value)
        return f"({text})" if expr.value < 0 and parent else text
    if isinstance(expr, AffineDimExpr):
        return names[expr.position]
    assert isinstance(expr, AffineBinaryOpExpr)  # no symbols: the checks refuse them
    symbol, level = _SYMBOLS[expr.kind]
    lhs, rhs = expr.lhs, expr.rhs
    if expr.kind == AffineBinaryOpKind.Add and _negative(rhs):
        text = f"{format_expr(lhs, names, 1)} - {format_expr(-rhs, names, 2)}"
    elif expr.kind == AffineBinaryOpKind.Mul and isinstance(rhs, AffineConstantExpr):
        if rhs.value == -1:
            text = f"-{format_expr(lhs, names, 3)}"
            level = 3
        else:  # constants first, as people write them: 8 * i
            text = f"{format_expr(rhs, names, 2)} * {format_expr(lhs, names, 3)}"
    elif expr.kind == AffineBinaryOpKind.CeilDiv:
        text = f"ceildiv({format_expr(lhs, names)}, {format_expr(rhs, names)})"
        level = 3
    else:  # a right operand of the same level keeps its parentheses
        text = (
            f"{format_expr(lhs, names, level)} {symbol} "
            f"{format_expr(rhs, names, level + 1)}"
        )
    return f"({text})" if level < parent else text


def _negative(expr: AffineExpr) -> bool:
    if isinstance(expr, AffineConstantExpr):
        return expr.value < 0
    return (
        isinstance(expr, AffineBinaryOpExpr)
        and expr.kind == AffineBinaryOpKind.Mul
        and isinstance(expr.rhs, AffineConstantExpr)
        and expr.rhs.value < 0
    )


def format_condition(sets: Sequence[AffineSet], names: Sequence[str]) -> str:
    """An `or` of sets as `i <= 6 and j % 2 == 0 or ...`: each constraint
    in the form that `comparison` builds back into the same constraint."""
    parts = []
    for affine_set in sets:
        terms = [format_constraint(c, names) for c in affine_set.constraints]
        parts.append(" and ".join(terms) or "0 == 0")
    return " or ".join(parts) or "0 != 0"


# -- comparisons as constraints -----------------------------------------------------

NEGATED = {"<": ">=", ">=": "<", "<=": ">", ">": "<=", "==": "!=", "!=": "=="}
"""The comparison that holds exactly where another does not."""


def comparison(op: str, a: AffineExpr, b: AffineExpr) -> list[tuple]:
    """`a op b` as an or of conjunctions of constraints `e >= 0` or
    `e == 0` (the forms of MLIR's integer sets): `a < b` is
    `b - a - 1 >= 0`, and `a != b` is `a < b or a > b`."""
    if op == "!=":
        return comparison("<", a, b) + comparison(">", a, b)
    kind = AffineConstraintKind.eq if op == "==" else AffineConstraintKind.ge
    lhs = {
        "<": lambda: b - a - 1,
        "<=": lambda: b - a,
        ">": lambda: a - b - 1,
        ">=": lambda: a - b,
        "==": lambda: a - b,
    }[op]()
    return [(AffineConstraintExpr(kind, lhs, AffineConstantExpr(0)),)]


def format_constraint(constraint: AffineConstraintExpr, names: Sequence[str]) -> str:
    """`i <= 6` for `-d0 + 6 >= 0`: the expression's terms left, its
    constant right, the first term positive; `e >= 0` when that form would
    not build back into this very constraint."""
    lhs, rhs = constraint.lhs, constraint.rhs
    symbol = constraint.kind.value
    op = {">=": ">=", "==": "=="}.get(symbol)
    if op is not None and rhs == AffineConstantExpr(0):
        terms, constant = _split_constant(lhs)
        if terms is not None:
            flipped = {">=": "<=", "==": "=="}[op]
            for left, sign, right in (
                (terms, op, -constant),
                (-terms, flipped, constant),
            ):
                if _first_term_negative(terms) != (left is terms) and _builds(
                    sign, left, right, constraint
                ):
                    return (
                        f"{format_expr(left, names)} {sign} "
                        f"{format_expr(AffineConstantExpr(right), names)}"
                    )
    return f"{format_expr(lhs, names)} {symbol} {format_expr(rhs, names)}"


def _split_constant(expr: AffineExpr) -> tuple[AffineExpr | None, int]:
    """`e + c` as (e, c); (e, 0) without a constant; (None, c) for a constant."""
    if isinstance(expr, AffineConstantExpr):
        return None, expr.value
    if (
        isinstance(expr, AffineBinaryOpExpr)
        and expr.kind == AffineBinaryOpKind.Add
        and isinstance(expr.rhs, AffineConstantExpr)
    ):
        return expr.lhs, expr.rhs.value
    return expr, 0


def _first_term_negative(expr: AffineExpr) -> bool:
    while isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Add:
        expr = expr.lhs
    return _negative(expr)


def _builds(
    op: str, left: AffineExpr, right: int, constraint: AffineConstraintExpr
) -> bool:
    """Whether `left op right` parses back into `constraint`."""
    built = comparison(op, left, AffineConstantExpr(right))
    return len(built) == 1 and built[0] == (constraint,)
