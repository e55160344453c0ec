"""Options of `.cpy` statements (`name` or `name=value`), checked
against what each statement takes."""

from __future__ import annotations

from typing import cast

from lark import Token, Tree

from copyir import errors
from copyir.cpy.expressions import (
    call_args,
    is_bare_name,
    is_call,
    static_integer,
    strip_parens,
)
from copyir.cpy.operands import OperandBuilder, int_literal
from copyir.cpy.scope import children, first_token
from copyir.cpy.syntax import one_of
from copyir.dialects.copy import BLOCKED, BOUNDED, ELEMENT, SQUEEZED, BlockDimAttr
from copyir.errors import CopyIRError
from copyir.hints import did_you_mean


class OptionReader(OperandBuilder):
    """A statement's options, each read as its kind wants it."""

    def options(self, trees: list[Tree], stmt: str, known: dict[str, str]) -> dict:
        """Options `name` or `name=value`, checked against what `stmt` takes."""
        values: dict[str, object] = {}
        for option in trees:
            name_token = children(option)[0]
            # An index map's value is its whole lambda.
            value = option if option.data == "index_map" else option.children[1]
            name = str(name_token)
            if name not in known:
                raise self.error(
                    name_token,
                    errors.UNKNOWN_OPTION.format(
                        option=name, stmt=stmt, known=one_of(sorted(known))
                    ),
                    did_you_mean(name, known),
                )
            if name in values:
                raise self.error(
                    name_token, errors.DUPLICATE_OPTION.format(option=name)
                )
            values[name] = self.option_value(name_token, stmt, known[name], value)
        return values

    def option_value(self, name: Token, stmt: str, kind: str, value: Tree | None):
        """An option's value as its kind wants it: a flag takes none; an
        int a literal; an index an index expression; a name a bare name; a
        block shape or a list of dimensions a tuple."""
        if kind == "flag" and value is None:
            return True
        is_map = value is not None and value.data == "index_map"
        if is_map != (kind == "map"):  # a map option given no map, or the reverse
            raise self.option_error(name, stmt, kind)
        if kind == "map":
            return value
        if kind == "grid" and value is not None:
            items = value.children if value.data == "tuple_value" else [value]
            what = f"An extent of {self.source(value)}"
            return [static_integer(self, i, what) for i in items if i is not None]
        if kind == "names" and value is not None:
            items = value.children if value.data == "tuple_value" else [value]
            items = [i for i in items if i is not None]
            if all(is_bare_name(i) for i in items):
                return [strip_parens(i).children[0] for i in items]
        if value is not None and value.data != "tuple_value":
            if kind == "int" and (literal := int_literal(value)) is not None:
                return self.integer(literal, first_token(value))
            if kind == "index":
                literal = int_literal(value)
                if literal is not None:  # most slots: no index expression to fold
                    return self.integer(literal, first_token(value))
                return self.index_value(value)
            if kind == "name" and is_bare_name(value):
                return str(strip_parens(value).children[0])
            if kind in ("block", "dims") and value.data == "parens":
                value = Tree("tuple_value", [strip_parens(value)])
            elif kind in ("dims", "counts") and int_literal(value) is not None:
                value = Tree("tuple_value", [value])
        if value is not None and value.data == "tuple_value":
            items = [item for item in value.children if item is not None]
            if kind == "block":
                return [self.block_dim(name, stmt, item) for item in items]
            if kind in ("dims", "counts") and all(
                int_literal(i) is not None for i in items
            ):
                return [  # every literal given
                    self.integer(cast(str, int_literal(i)), first_token(i))
                    for i in items
                ]
        raise self.option_error(name, stmt, kind)

    def option_error(self, name: Token, stmt: str, kind: str) -> CopyIRError:
        why = {
            "flag": "is a flag and takes no value",
            "int": "takes an integer",
            "index": "takes an index expression",
            "name": "takes a name",
            "block": "takes a block shape such as (128, 128)",
            "dims": "takes dimensions such as (0, 1)",
            "counts": "takes buffer counts (in, out) such as (2, 1)",
            "grid": "takes a grid such as (8, 3)",
            "names": "takes dimension semantics such as (parallel, arbitrary)",
            "map": "takes an index map such as (i, j) -> (i, j)",
        }[kind]
        return self.error(
            name, errors.OPTION_VALUE.format(option=name, stmt=stmt, why=why)
        )

    def block_dim(self, name: Token, stmt: str, tree: Tree) -> BlockDimAttr:
        """`128` (Blocked), `Blocked(128)`, `Element(48)`, `BoundedSlice(8)`
        (a pipeline's index map gives its slice) or `None` (squeezed)."""
        if is_bare_name(tree) and strip_parens(tree).children[0] == "None":
            return BlockDimAttr(SQUEEZED)
        if (literal := int_literal(tree)) is not None:
            return BlockDimAttr(BLOCKED, self.integer(literal, first_token(tree)))
        args = call_args(tree) if tree.data == "call" else []
        if is_call(tree, "BoundedSlice") and len(args) == 2:  # a buffered_ref's
            bound, size = (int_literal(a) for a in args)
            if bound is not None and size is not None:
                bound_value = self.integer(bound, first_token(args[0]))
                size_value = self.integer(size, first_token(args[1]))
                return BlockDimAttr(BOUNDED, size_value, bound_value)
        if tree.data == "call" and len(args) == 1:
            function = str(tree.children[0])
            literal = int_literal(args[0])
            if function in _BLOCK_KIND_OF and literal is not None:
                size = self.integer(literal, first_token(args[0]))
                if _BLOCK_KIND_OF[function] == BOUNDED:  # the slice: the index map's
                    return BlockDimAttr(BOUNDED, size, size)
                return BlockDimAttr(_BLOCK_KIND_OF[function], size)
            notes = did_you_mean(function, _BLOCK_KIND_OF)
        else:
            notes = ()
        raise self.error(
            tree,
            errors.OPTION_VALUE.format(
                option=name, stmt=stmt, why="takes a block shape such as (128, 128)"
            ),
            notes,
        )


_BLOCK_KIND_OF = {"Blocked": BLOCKED, "Element": ELEMENT, "BoundedSlice": BOUNDED}
