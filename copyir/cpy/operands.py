"""Operands of `.cpy` statements: names with subscripts become views and
semaphore indices, index expressions become index values."""

from __future__ import annotations

from typing import cast

from lark import Token, Tree
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap

from copyir import errors, pytree
from copyir.attributes import i64_array
from copyir.cpy.expressions import (
    Affine,
    call_args,
    checked,
    in_print_order,
    is_call,
    static_integer,
    strip_parens,
)
from copyir.cpy.scope import INDEX, ScopedBuilder, children
from copyir.dialects.copy import (
    DYNAMIC,
    Combine,
    CombineAttr,
    IndexOp,
    RefType,
    SemaphoreArrayType,
    SemaphoreType,
    SemIndexOp,
    Subscript,
    ViewOp,
    describe,
    sem_index_result_type,
    view_result_type,
)
from copyir.index import format_expr

Where = tuple[Token, list, int]
"""An operand's name, its subscript groups, and the group being read."""


class OperandBuilder(ScopedBuilder):
    """Operands, pytrees of operands, views and index values."""

    def tree(self, tree: Tree, depth: int) -> object:
        """A pytree of operands as nested tuples, lists and dicts."""
        if depth > pytree.MAX_DEPTH:
            raise self.error(
                tree, errors.NESTED_TOO_DEEP.format(limit=pytree.MAX_DEPTH)
            )
        kind = tree.data
        if kind == "operand":
            return self.operand(tree)
        if kind == "paren":
            return self.tree(tree.children[0], depth + 1)
        children = [c for c in tree.children if c is not None]
        if kind == "record":
            record: dict[str, object] = {}
            for entry in children:
                key, child = entry.children
                if str(key) in record:
                    raise self.error(key, errors.DUPLICATE_KEY.format(key=key))
                record[str(key)] = self.tree(child, depth + 1)
            return record
        items = [self.tree(child, depth + 1) for child in children]
        return items if kind == "list" else tuple(items)

    def operand(self, tree: Tree) -> SSAValue:
        """A name with subscripts: each `[...]` is a view (or a semaphore
        index) of its own, as written; `[...]` alone is the whole ref."""
        name, *groups = children(tree)
        value = self.lookup(name)
        for k, group in enumerate(groups):
            if type(group) is Tree and group.data == "whole":
                continue
            value = self.subscript(value, subscript_items(group), (name, groups, k))
        return value

    def written(self, where: Where) -> str:
        """An operand as written up to a subscript group, for messages (only
        they need it: most views never make one)."""
        name, groups, last = where
        texts = [str(name)]
        for group in groups[: last + 1]:
            if isinstance(group, Token):
                texts.append(self.items_text(subscript_items(group)))
            else:
                texts.append("[...]" if group.data == "whole" else self.source(group))
        return "".join(texts)

    def subscript(self, value: SSAValue, items: list, where: Where) -> SSAValue:
        dynamic: list[SSAValue] = []
        if isinstance(value.type, SemaphoreArrayType | SemaphoreType):
            indices = []
            for kind, parts, at in items:
                if kind != "index":
                    raise self.error(
                        at,
                        "Semaphore arrays take integer indices only: "
                        + self.written(where),
                    )
                indices.append(self.dynamic_part(parts[0], at, dynamic))
            return self.emit(
                SemIndexOp,
                [value, *dynamic],
                [sem_index_result_type(value.type, len(indices))],
                {"indices": i64_array(tuple(indices))},
            ).results[0]
        shape = value.type.get_shape() if isinstance(value.type, RefType) else ()
        subscripts = [
            self.view_subscript(
                item, shape[dim] if dim < len(shape) else 1, where, dynamic
            )
            for dim, item in enumerate(items)
        ]
        return self.emit(
            ViewOp,
            [value, *dynamic],
            [view_result_type(value.type, subscripts)],
            ViewOp.subscript_properties(subscripts),
        ).results[0]

    def view_subscript(
        self, item, extent: int, where: Where, dynamic: list[SSAValue]
    ) -> tuple[int, int, bool]:
        """(start, size, dropped) of one subscript; a start computed from
        index values is DYNAMIC, and its value joins `dynamic`."""
        kind, parts, at = item
        if kind == "index":
            return (self.dynamic_part(parts[0], at, dynamic), 1, True)
        if kind == "ds":
            return self.ds_subscript(parts[0], where, dynamic)
        start, stop, step = parts
        if step is not None:
            raise self.error(at, errors.SLICE_STEP.format(expr=self.written(where)))
        if type(start) is Tree or type(stop) is Tree:
            return self.affine_slice(start, stop, extent, where, at, dynamic)
        lo = 0 if start is None else self.integer(start, at)
        hi = extent if stop is None else self.integer(stop, at)
        return self.static_slice(lo, hi, where, at)

    def static_slice(self, lo: int, hi: int, where: Where, at) -> Subscript:
        for bound in (lo, hi):
            if bound < 0:
                raise self.error(
                    at,
                    errors.NEGATIVE_INDEX.format(index=bound, expr=self.written(where)),
                )
        return (lo, hi - lo, False)

    def ds_subscript(
        self, call: Tree, where: Where, dynamic: list[SSAValue]
    ) -> tuple[int, int, bool]:
        """`ds(start, size)`: Pallas' slice, its size static."""
        args = call_args(call)
        if len(args) != 2:
            raise self.error(call, errors.DS_FORM.format(expr=self.source(call)))
        start = self.index_value(args[0])
        size = static_integer(self, args[1], f"The size of {self.source(call)}")
        if isinstance(start, int):
            return self.static_slice(start, start + size, where, call)
        dynamic.append(start)
        return (DYNAMIC, size, False)

    def affine_slice(
        self, start, stop, extent: int, where: Where, at, dynamic: list[SSAValue]
    ) -> tuple[int, int, bool]:
        """`a:b` with index expressions: its size b - a must fold to an
        integer (`8 * i : 8 * i + 8`)."""
        affine = Affine(self)
        lo = AffineConstantExpr(0) if start is None else affine.expr(start)
        hi = AffineConstantExpr(extent) if stop is None else affine.expr(stop)
        lo, hi = checked(self, start or at, lo), checked(self, stop or at, hi)
        if isinstance(lo, AffineConstantExpr) and isinstance(hi, AffineConstantExpr):
            return self.static_slice(lo.value, hi.value, where, at)
        size = _fold(hi - lo, len(affine.dims))
        if not isinstance(size, AffineConstantExpr):
            names = [describe(d) for d in affine.dims]
            raise self.error(
                at,
                errors.SLICE_NOT_STATIC.format(
                    slice=self.source(at),
                    expr=self.written(where),
                    size=format_expr(size, names),
                ),
            )
        if isinstance(lo, AffineConstantExpr):
            return self.static_slice(lo.value, lo.value + size.value, where, at)
        (lo,), dims = in_print_order([lo], affine.dims)
        dynamic.append(self.index_of(lo, dims))
        return (DYNAMIC, size.value, False)

    def dynamic_part(self, part, at, dynamic: list[SSAValue]) -> int:
        """An index from an item's part: its integer, or DYNAMIC with its
        value appended to `dynamic`."""
        if type(part) is str:  # the one-token fast path: text of an integer
            return self.integer(part, at)
        value = self.index_value(part)
        if type(value) is int:
            return value
        dynamic.append(cast(SSAValue, value))
        return DYNAMIC

    def index_value(self, tree: Tree) -> int | SSAValue:
        """An index expression: an integer when it folds to one, the value a
        bare name names, or a new copy.index (of a min or max too)."""
        affine = Affine(self)
        combine, exprs = affine.results(tree)
        if combine is not None:
            return self.combined(combine, exprs, affine.dims)
        (expr,) = exprs
        if isinstance(expr, AffineConstantExpr):
            return expr.value
        (expr,), dims = in_print_order([expr], affine.dims)
        return self.index_of(expr, dims)

    def combined(
        self, combine: str, exprs: list[AffineExpr], dims: list[SSAValue]
    ) -> SSAValue:
        """A `copy.index min` (or max) of the expressions over `dims`."""
        exprs, dims = in_print_order(exprs, dims)
        map = AffineMapAttr(AffineMap(len(dims), 0, tuple(exprs)))
        kind = CombineAttr(Combine(combine))
        op = self.emit(IndexOp, dims, [INDEX], {"map": map, "combine": kind})
        return op.results[0]

    def index_of(self, expr: AffineExpr, dims: list[SSAValue]) -> SSAValue:
        if isinstance(expr, AffineDimExpr):
            return dims[expr.position]
        return self.emit(
            IndexOp, dims, [INDEX], {"map": affine_map(expr, len(dims))}
        ).results[0]

    def items_text(self, items: list) -> str:
        """Subscripts written back as the user wrote them, for messages."""
        texts = []
        for kind, parts, _ in items:
            parts = [
                p if p is None or isinstance(p, str) else self.source(p) for p in parts
            ]
            if kind != "slice":
                texts.append(parts[0])
            else:
                start, stop, step = ("" if p is None else p for p in parts)
                texts.append(f"{start}:{stop}" + (f":{step}" if step else ""))
        return f"[{', '.join(texts)}]"


def affine_map(expr: AffineExpr, dims: int) -> AffineMapAttr:
    return AffineMapAttr(AffineMap(dims, 0, (expr,)))


def _fold(expr: AffineExpr, dims: int) -> AffineExpr:
    """The expression simplified (terms collected), when xDSL can."""
    try:
        return expr.simplify(dims, 0)
    except Exception:
        return expr


def int_literal(tree: Tree | Token) -> str | None:
    """`8` or `-8` (a literal, not an expression), as text; else None."""
    tree = strip_parens(tree)
    if not isinstance(tree, Tree):
        return None
    if tree.data == "int":
        return str(tree.children[0])
    if tree.data == "neg":
        inner = strip_parens(tree.children[-1])
        if isinstance(inner, Tree) and inner.data == "int":
            return "-" + str(inner.children[0])
    return None


def subscript_items(group: Tree | Token) -> list[tuple[str, list, Token]]:
    """Subscripts as ("index", [i], at), ("slice", [start, stop, step], at)
    or ("ds", [call], at).

    From a SUBSCRIPTS token the parts are text (integers); from a tree they
    are expression trees. Missing parts are None.
    """
    if isinstance(group, Token):
        items = []
        parts = [p.strip() for p in group[1:-1].split(",")]
        for part in parts[:-1] if parts[-1] == "" else parts:
            if ":" not in part:
                items.append(("index", [part], group))
                continue
            bounds = [b.strip() or None for b in part.split(":")] + [None]
            items.append(("slice", bounds[:3], group))
        return items
    items = []
    for item in group.children:
        if item is None:
            continue
        at = item  # locates the item's errors, and gives its text
        if item.data == "index":
            expr = item.children[0]
            if is_call(expr, "ds"):
                items.append(("ds", [strip_parens(expr)], at))
            else:
                items.append(("index", [expr], at))
        else:
            bounds = [*item.children, None, None, None][:3]
            items.append(("slice", bounds, at))
    return items
