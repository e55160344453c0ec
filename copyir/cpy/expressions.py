"""Expressions of the authoring syntax, from lark parse trees to IR values.

One expression grammar (`expr` in grammar.lark) serves three places, and
each takes what it allows:

- an index expression (a view start, an index, a slot, a block or
  semaphore index, `slot = i % 2`) becomes an xDSL `AffineExpr` over the
  index values it names, dimension k being the k-th of them in order of
  first appearance; xDSL's own arithmetic builds it, so that a product of
  two index values is refused where xDSL refuses it; a whole index may be
  `min(a, b, ...)` or `max(...)` of such expressions (`Affine.results`,
  a `copy.index min`);
- a `when` condition becomes an or of `AffineSet`s (its disjunctive normal
  form, `copyir.index.comparison` for each comparison);
- a computation becomes the prefix form of `copyir.compute`.

Dimensions are numbered in the order in which the printed expression
mentions them (xDSL's depth-first order), so that printing and parsing
again gives the same operands in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from lark import Token, Tree
from xdsl.dialects.builtin import IndexType
from xdsl.ir import SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineConstraintExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSet,
)

from copyir import errors, pytree
from copyir.compute import Apply, Expression, Literal, Operand
from copyir.cpy.keywords import FLOAT_WORDS
from copyir.cpy.scope import children
from copyir.dialects.copy import RefType, describe_type
from copyir.errors import CopyIRError, Note
from copyir.index import NEGATED, comparison, constant_out_of_range

MAX_CONDITION_SETS = 256
"""The most conjunctions a `when` condition may have in or-of-ands form
(each `!=` or `or` under an `and` multiplies them)."""
MAX_TERMS = 256
"""The most terms a flat chain of `+` and `-` may have: a chain is one
level of nesting, but the expression it builds nests one level per term
(xDSL's affine expressions are binary), which the printers and evaluators
walk recursively."""
_DIVISIONS = {
    "floordiv": AffineBinaryOpKind.FloorDiv,
    "mod": AffineBinaryOpKind.Mod,
}
_COMPUTE_OPERATIONS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div"}
COMBINES = ("min", "max")
"""The calls that may make a whole index (`copy.index min`)."""

Constraints = tuple[AffineConstraintExpr, ...]


class Source(Protocol):
    """What the builder lends the translation: names, messages, locations."""

    def lookup(self, token: Token) -> SSAValue: ...

    def error(
        self, item: Tree | Token, message: str, notes: tuple[Note, ...] = ()
    ) -> CopyIRError: ...

    def source(self, item: Tree | Token) -> str: ...

    def integer(self, text: str, at: Token | None = None) -> int: ...


def strip_parens(tree: Any) -> Any:
    """The expression inside any parentheses (a parse tree, or a token)."""
    while isinstance(tree, Tree) and tree.data == "parens":
        tree = tree.children[0]
    return tree


def is_call(tree: Tree | Token, name: str) -> bool:
    tree = strip_parens(tree)
    return isinstance(tree, Tree) and tree.data == "call" and tree.children[0] == name


def call_args(tree: Tree) -> list[Any]:
    return _operands(strip_parens(tree))[1:]


def is_bare_name(tree: Tree | Token) -> bool:
    """`x` (or `(x)`): an operand without subscripts."""
    tree = strip_parens(tree)
    return isinstance(tree, Tree) and tree.data == "operand" and len(tree.children) == 1


# -- index expressions ----------------------------------------------------------


class Affine:
    """Translates index expressions, collecting the index values they name."""

    def __init__(self, source: Source, notes: tuple[Note, ...] = ()):
        self.source = source
        self.notes = notes  # beside an error about a name that is no index
        self.dims: list[SSAValue] = []

    def expr(self, tree: Tree, depth: int = 0) -> AffineExpr:
        """The expression of `tree` over `self.dims` (which it extends)."""
        if depth > pytree.MAX_DEPTH:
            raise self.source.error(
                tree, errors.NESTED_TOO_DEEP.format(limit=pytree.MAX_DEPTH)
            )
        kind = tree.data
        children = _operands(tree)
        if kind == "int":
            return AffineConstantExpr(
                self.source.integer(str(children[0]), children[0])
            )
        if kind == "operand":
            return self.name(tree)
        if kind == "parens":
            return self.expr(children[0], depth + 1)
        if kind == "neg":
            return -self.expr(children[0], depth + 1)
        if kind == "call" and children[0] == "ceildiv" and len(children) == 3:
            return self.division(tree, AffineBinaryOpKind.CeilDiv, children[1:], depth)
        if kind == "call" and children[0] in COMBINES:
            raise self.source.error(
                tree,
                errors.INDEX_MIN_MAX_INSIDE.format(
                    expr=self.source.source(tree), name=children[0]
                ),
            )
        if kind == "call" and children[0] == "ds":
            raise self.source.error(
                tree, errors.DS_MISPLACED.format(expr=self.source.source(tree))
            )
        if kind in _DIVISIONS:
            return self.division(tree, _DIVISIONS[kind], children, depth)
        if kind in ("add", "sub"):
            return self.sum(tree, depth)
        if kind == "mul":
            lhs, rhs = (self.expr(c, depth + 1) for c in children)
            try:
                return lhs * rhs
            except NotImplementedError:
                raise self.not_affine(tree, errors.INDEX_MULTIPLIES) from None
        raise self.source.error(
            tree,
            errors.INDEX_OPERATOR.format(
                expr=self.source.source(tree), what=self.what(tree)
            ),
        )

    def results(self, tree: Tree) -> tuple[str | None, list[AffineExpr]]:
        """A whole index: its expression (no combine), or the expressions a
        `min(...)` or `max(...)` combines, each checked."""
        inner = strip_parens(tree)
        if not is_call(inner, "min") and not is_call(inner, "max"):
            return None, [checked(self.source, tree, self.expr(tree))]
        name, *args = _operands(inner)
        if len(args) < 2:
            raise self.source.error(
                tree,
                errors.INDEX_MIN_MAX_ARGUMENTS.format(
                    expr=self.source.source(tree), name=name, count=len(args)
                ),
            )
        return str(name), [checked(self.source, a, self.expr(a, 1)) for a in args]

    def sum(self, tree: Tree, depth: int) -> AffineExpr:
        """A flat chain `a + b - c` (the grammar nests it to the left, one
        level per term) is one level of nesting, however long, as a chain
        of `and` or `or` is: the printer writes a linearised grid step as a
        sum of one term per grid dimension."""
        top = tree
        terms: list[tuple[str, Tree]] = []
        while isinstance(tree, Tree) and tree.data in ("add", "sub"):
            lhs, rhs = _operands(tree)
            terms.append((tree.data, rhs))
            tree = lhs
        if len(terms) >= MAX_TERMS:
            raise self.source.error(
                top,
                errors.INDEX_TOO_LONG.format(count=len(terms) + 1, limit=MAX_TERMS),
            )
        total = self.expr(tree, depth + 1)
        for kind, term in reversed(terms):
            value = self.expr(term, depth + 1)
            total = total + value if kind == "add" else total - value
        return total

    def name(self, tree: Tree) -> AffineExpr:
        """A name as a dimension; it must be an index value."""
        name, *subscripts = children(tree)
        if subscripts:
            raise self.source.error(
                tree,
                errors.INDEX_OPERATOR.format(
                    expr=self.source.source(tree), what="a view"
                ),
            )
        value = self.source.lookup(name)
        if not isinstance(value.type, IndexType):
            raise self.source.error(
                name,
                errors.NOT_AN_INDEX.format(name=name, type=describe_type(value.type)),
                self.notes,
            )
        for position, known in enumerate(self.dims):
            if known is value:
                return AffineDimExpr(position)
        self.dims.append(value)
        return AffineDimExpr(len(self.dims) - 1)

    def division(
        self,
        tree: Tree,
        kind: AffineBinaryOpKind,
        operands: Sequence[Tree],
        depth: int,
    ) -> AffineExpr:
        """`a // b`, `a % b`, `ceildiv(a, b)`: b a positive constant."""
        lhs, rhs = (self.expr(c, depth + 1) for c in operands)
        if not isinstance(rhs, AffineConstantExpr):
            raise self.not_affine(tree, errors.INDEX_DIVIDES)
        if rhs.value < 1:
            raise self.source.error(
                tree,
                errors.INDEX_DIVISOR.format(
                    expr=self.source.source(tree), divisor=rhs.value
                ),
            )
        return AffineExpr.binary(kind, lhs, rhs)

    def not_affine(self, tree: Tree, why: str) -> CopyIRError:
        return self.source.error(
            tree, errors.INDEX_NOT_AFFINE.format(expr=self.source.source(tree), why=why)
        )

    def what(self, tree: Tree) -> str:
        """What an index expression cannot hold, for its message."""
        if tree.data == "div":
            return "/ (write // to divide integers)"
        if tree.data == "float":
            return f"the float {tree.children[0]}"
        if tree.data == "call":
            return f"{tree.children[0]}(...)"
        return tree.data


def checked(source: Source, tree: Tree, expr: AffineExpr) -> AffineExpr:
    """The expression, once every constant in it fits in 64 bits."""
    if (value := constant_out_of_range([expr])) is not None:
        raise source.error(tree, errors.INT_RANGE.format(value=value))
    return expr


def in_print_order(
    exprs: Sequence[AffineExpr], dims: Sequence[SSAValue]
) -> tuple[list[AffineExpr], list[SSAValue]]:
    """Renumber dimensions in the order the expressions mention them, and
    drop the dimensions they do not mention."""
    order: list[int] = []
    for expr in exprs:
        for node in expr.dfs():
            if isinstance(node, AffineDimExpr) and node.position not in order:
                order.append(node.position)
    if order == list(range(len(dims))):
        return list(exprs), list(dims)
    renamed = [AffineDimExpr(0)] * len(dims)
    for new, old in enumerate(order):
        renamed[old] = AffineDimExpr(new)
    return (
        [e.replace_dims_and_symbols(renamed, ()) for e in exprs],
        [dims[old] for old in order],
    )


def static_integer(source: Source, tree: Tree, what: str) -> int:
    """An index expression of constants only, folded; `what` names it."""
    expr = Affine(source).expr(tree)
    if not isinstance(expr, AffineConstantExpr):
        raise source.error(
            tree, errors.STATIC_INTEGER.format(what=what, expr=source.source(tree))
        )
    checked(source, tree, expr)
    return expr.value


# -- conditions ---------------------------------------------------------------


def condition(source: Source, tree: Tree) -> tuple[list[AffineSet], list[SSAValue]]:
    """A `when` condition as an or of conjunctions, over the index values it
    names: `not` pushed down to the comparisons, `and` distributed over
    `or`."""
    affine = Affine(source)
    conjunctions = _dnf(source, affine, tree, False, tree, 0)
    exprs = [c.lhs for conjunction in conjunctions for c in conjunction]
    renamed, dims = in_print_order(exprs, affine.dims)
    at = iter(renamed)
    sets = [
        AffineSet(
            len(dims),
            0,
            tuple(
                AffineConstraintExpr(c.kind, next(at), c.rhs, canonicalize=False)
                for c in conjunction
            ),
        )
        for conjunction in conjunctions
    ]
    return sets, dims


def _dnf(
    source: Source,
    affine: Affine,
    tree: Tree,
    negated: bool,
    top: Tree,
    depth: int,
) -> list[Constraints]:
    if depth > pytree.MAX_DEPTH:
        raise source.error(tree, errors.NESTED_TOO_DEEP.format(limit=pytree.MAX_DEPTH))
    kind = tree.data
    if kind == "cond_not":
        return _dnf(source, affine, tree.children[0], not negated, top, depth + 1)
    if kind in ("cond_and", "cond_or"):
        parts = [
            _dnf(source, affine, child, negated, top, depth + 1)
            for child in _chained_terms(tree)
        ]
        both = (kind == "cond_and") != negated
        return _product(source, parts, top) if both else [c for p in parts for c in p]
    # A chain of comparisons `a < b <= c` is `a < b and b <= c`.
    items = tree.children
    parts = []
    for k in range(0, len(items) - 2, 2):
        lhs = checked(source, items[k], affine.expr(items[k]))
        rhs = checked(source, items[k + 2], affine.expr(items[k + 2]))
        op = str(items[k + 1])
        parts.append(comparison(NEGATED[op] if negated else op, lhs, rhs))
    if negated:  # not (a and b) is (not a) or (not b)
        return [c for p in parts for c in p]
    return _product(source, parts, top)


def _chained_terms(tree: Tree) -> list[Tree]:
    """The terms of a flat chain `a or b or c` (the grammar nests it to the
    left, one level per term): one level, however long the chain, so that
    only parentheses and `not` count towards the nesting limit."""
    terms = []
    while isinstance(tree.children[0], Tree) and tree.children[0].data == tree.data:
        terms.append(tree.children[1])
        tree = tree.children[0]
    terms += reversed(tree.children)
    return terms[::-1]


def _product(
    source: Source, parts: list[list[Constraints]], top: Tree
) -> list[Constraints]:
    """The conjunction of disjunctions, distributed: an or of ands. A part
    of one conjunction extends each in place (a long `a < b < c < ...`
    stays linear)."""
    result: list[list[AffineConstraintExpr]] = [[]]
    for part in parts:
        if len(part) == 1:
            for conjunction in result:
                conjunction.extend(part[0])
            continue
        result = [[*a, *b] for a in result for b in part]
        if len(result) > MAX_CONDITION_SETS:
            raise source.error(
                top,
                errors.CONDITION_TOO_LARGE.format(
                    expr=source.source(top), limit=MAX_CONDITION_SETS
                ),
            )
    return [tuple(conjunction) for conjunction in result]


# -- computations -------------------------------------------------------------


def computation(
    source: Source,
    tree: Tree,
    operand: Callable[[Tree], int],
    depth: int = 0,
) -> Expression:
    """The prefix form of a computation; `operand` gives the input number of
    a ref or view (building its views)."""
    if depth > pytree.MAX_DEPTH:
        raise source.error(tree, errors.NESTED_TOO_DEEP.format(limit=pytree.MAX_DEPTH))
    kind = tree.data
    children = _operands(tree)
    if kind in ("int", "float"):
        return Literal(str(children[0]))
    if kind == "operand":
        if is_bare_name(tree) and str(children[0]) in FLOAT_WORDS:
            try:  # a ref of that name comes first; else the float itself
                if _in_hbm(source.lookup(children[0])):
                    return Literal(str(children[0]))
            except CopyIRError:
                return Literal(str(children[0]))
        return Operand(operand(tree))
    if kind == "parens":
        return computation(source, children[0], operand, depth + 1)
    if kind == "neg":
        (inner,) = children
        if isinstance(inner, Tree) and inner.data in ("int", "float"):
            return Literal("-" + str(inner.children[0]))  # -2.0 is a literal
        return Apply("neg", (computation(source, inner, operand, depth + 1),))
    if kind in _COMPUTE_OPERATIONS:
        args = tuple(computation(source, c, operand, depth + 1) for c in children)
        return Apply(_COMPUTE_OPERATIONS[kind], args)
    if kind == "call" and children[0] in ("max", "min"):
        name, *args = children
        if len(args) != 2:
            raise source.error(
                tree,
                errors.COMPUTE_ARGUMENTS.format(
                    name=name, count=len(args), expr=source.source(tree)
                ),
            )
        return Apply(
            str(name), tuple(computation(source, a, operand, depth + 1) for a in args)
        )
    what = {"floordiv": "//", "mod": "%"}.get(kind)
    if what is None:
        what = f"{children[0]}(...)" if kind == "call" else kind
    raise source.error(
        tree, errors.COMPUTE_OPERATOR.format(what=what, expr=source.source(tree))
    )


def _in_hbm(value: SSAValue) -> bool:
    """A ref in hbm, such as a kernel's parameter, which no computation
    reads: a parameter named `nan` or `inf` leaves the word to the float, so
    that the printer keeps the parameter's name (the kernel's interface)
    and the padding it writes with the word."""
    return isinstance(value.type, RefType) and value.type.space_name == "hbm"


def _operands(tree: Tree) -> list[Any]:
    """A node's children without the placeholders and the kept `-` tokens
    (shaped by the grammar, see `children`)."""
    return [
        c
        for c in tree.children
        if c is not None and not (isinstance(c, Token) and c.type == "MINUS")
    ]


__all__ = [
    "COMBINES",
    "MAX_CONDITION_SETS",
    "Affine",
    "call_args",
    "checked",
    "computation",
    "condition",
    "in_print_order",
    "is_bare_name",
    "is_call",
    "static_integer",
    "strip_parens",
]
