"""What every part of the `.cpy` builder shares: the block being built,
the names visible in it (scoped as SSA values are), locations and messages."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from lark import Token, Tree
from xdsl.dialects.builtin import (
    FileLineColLoc,
    IndexType,
    IntAttr,
    LocationAttr,
    StringAttr,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from copyir import errors, pytree
from copyir.attributes import int_attr
from copyir.cpy.keywords import VALUE_WORDS
from copyir.dialects.copy import set_name
from copyir.errors import CopyIRError, Loc, Note
from copyir.hints import did_you_mean
from copyir.index import INT64
from copyir.locations import loc_of


@dataclass
class _Scope:
    """A `for`, `when`, `pipeline` or `scope` body: the names defined in it
    go when it ends."""

    construct: str
    line: int
    names: list[str]


class ScopedBuilder:
    """Builds ops into the current block at the current statement's location.

    Names are scoped as SSA values are: a loop index and any name defined in
    a `for` or `when` body exist inside that body only, and no name is
    defined twice while it is visible (a loop index is never rebound).
    """

    def __init__(self, filename: str, text: str):
        self.filename = filename
        self.filename_attr = StringAttr(filename)
        self.text = text
        self.names: dict[str, tuple[SSAValue, int]] = {}
        # A loop's or a pipeline's index: the line and the construct.
        self.loop_lines: dict[str, tuple[int, str]] = {}
        self.scopes: list[_Scope] = []
        self.gone: dict[str, Note] = {}
        self.block: Block | None = None
        self.location: LocationAttr | None = None

    def loc(self, item: Tree | Token) -> Loc | None:
        token = first_token(item)
        if token is None:
            return None
        return Loc(self.filename, *position(token))

    def error(
        self, item: Tree | Token, message: str, notes: tuple[Note, ...] = ()
    ) -> CopyIRError:
        return CopyIRError(message, self.loc(item), notes)

    def source(self, item: Tree | Token) -> str:
        """The text a construct was written as, on one line, for messages.

        The parse tree keeps no brackets, so the text takes in those that
        match the ones it holds; a subscript group gets its own brackets.
        """
        if isinstance(item, Tree) and item.data in _SOURCE_FORMS:
            return _SOURCE_FORMS[item.data](
                ["" if c is None else self.source(c) for c in item.children]
            )
        first, last = first_token(item), last_token(item)
        if isinstance(item, Tree) and (first is None or last is None):
            return "".join(self.source(c) for c in item.children if c is not None)
        if (
            first is None
            or last is None
            or first.start_pos is None
            or last.end_pos is None
        ):
            return str(item)
        text, start, end = self.text, first.start_pos, last.end_pos
        depth = lowest = 0
        for char in text[start:end]:
            if char in "([":
                depth += 1
            elif char in ")]":
                depth -= 1
                lowest = min(lowest, depth)
        start = _extend(text, start, -lowest, "([", -1)
        end = _extend(text, end, depth - lowest, ")]", 1)
        return " ".join(text[start:end].split())

    def integer(self, text: str, at: Token | None = None) -> int:
        """An integer literal that fits in 64 bits; `at` locates its error."""
        digits = text.lstrip("-")
        value = int(text) if len(digits) <= 19 else 2**63
        if value not in INT64:
            loc = self.loc(at) if at is not None else None
            raise CopyIRError(errors.INT_RANGE.format(value=text), loc)
        return value

    def signed(self, tree: Tree) -> int:
        """A `signed` integer of the grammar: `8`, `-8`."""
        minus, digits = children(tree)
        return self.integer(("-" if minus else "") + digits, digits)

    def statement_location(self, stmt: Tree, loc_tree: Tree | None) -> FileLineColLoc:
        if loc_tree is not None:
            file, line, col = children(loc_tree)
            location = FileLineColLoc(
                StringAttr(unquote(file)),
                IntAttr(self.signed(line)),
                IntAttr(self.signed(col)),
            )
            if loc_of(location) is None:
                raise self.error(
                    loc_tree,
                    errors.MALFORMED_LOCATION.format(
                        why="it needs a file name, and a line and column from 1 up"
                    ),
                )
            return location
        token = first_token(stmt)
        assert token is not None  # a statement is written
        line, col = position(token)
        return FileLineColLoc(self.filename_attr, IntAttr(line), int_attr(col))

    def emit(
        self,
        op_type: type[Operation],
        operands: Sequence[SSAValue] = (),
        result_types: Sequence[Attribute] = (),
        properties: Mapping[str, Attribute] | None = None,
        regions: Sequence[Region] = (),
    ) -> Operation:
        """Append an op at the current statement's location.

        `create` rather than `build`: the builder already has the operands
        flat and the properties made, and IRDL's argument handling is a
        third of the cost of a large parse.
        """
        op = op_type.create(
            operands=operands,
            result_types=result_types,
            properties=properties or {},
            regions=regions,
            location=self.location,
        )
        assert self.block is not None  # inside a kernel
        self.block.add_op(op)
        return op

    def define(self, token: Token, value: SSAValue) -> None:
        self.define_alias(token, value)
        set_name(value, str(token))

    def define_alias(self, token: Token, value: SSAValue) -> None:
        name = str(token)
        if name in self.names:
            if name in self.loop_lines:
                line, construct = self.loop_lines[name]
                raise self.error(
                    token,
                    errors.LOOP_INDEX_REBOUND.format(
                        name=name, line=line, construct=construct
                    ),
                )
            first = self.names[name][1]
            raise self.error(token, errors.DEFINED_TWICE.format(name=name, line=first))
        self.names[name] = (value, position(token)[0])
        self.gone.pop(name, None)
        if self.scopes:
            self.scopes[-1].names.append(name)

    def lookup(self, token: Token) -> SSAValue:
        entry = self.names.get(str(token))
        if entry is None:
            gone = self.gone.get(str(token))
            raise self.error(
                token,
                errors.UNDEFINED.format(name=token),
                (gone,)
                if gone is not None
                else self.comment_hint(token)
                or did_you_mean(str(token), [*self.names, *VALUE_WORDS]),
            )
        return entry[0]

    def comment_hint(self, token: Token) -> tuple[Note, ...]:
        """`t = 3 // comment` divides by `comment`: a `//` comment, surely."""
        start = self.text.rfind("\n", 0, token.start_pos) + 1
        before = self.text[start : token.start_pos].rstrip()
        return (Note(errors.HINT_COMMENT),) if before.endswith("//") else ()

    def open_scope(self, construct: str, token: Token, block: Block) -> Block | None:
        """Enter a body; returns the block to come back to."""
        if len(self.scopes) >= pytree.MAX_DEPTH:
            raise self.error(
                token, errors.NESTED_TOO_DEEP.format(limit=pytree.MAX_DEPTH)
            )
        self.scopes.append(_Scope(construct, position(token)[0], []))
        outer, self.block = self.block, block
        return outer

    def close_scope(self, outer: Block | None) -> None:
        """Leave a body: its names go, and a later use says why."""
        scope = self.scopes.pop()
        for name in scope.names:
            _, line = self.names.pop(name)
            if name in self.loop_lines:
                line, construct = self.loop_lines.pop(name)
                note = errors.OUT_OF_SCOPE_INDEX.format(
                    name=name, line=line, construct=construct
                )
            else:
                note = errors.OUT_OF_SCOPE_NAME.format(
                    name=name, line=line, construct=scope.construct, body=scope.line
                )
            self.gone[name] = Note(note)
        self.block = outer

    def statements(self, body: Tree) -> None:
        """Build a body's statements, each at its location, by the method
        named as its grammar rule."""
        for stmt in body.children:
            self.location = self.statement_location(stmt, _statement_loc(stmt))
            getattr(self, stmt.data)(stmt)


_SOURCE_FORMS = {
    "subscripts": lambda parts: f"[{', '.join(parts)}]",
    "slice": lambda parts: ":".join(parts[:2] + [p for p in parts[2:] if p]),
    "index": lambda parts: parts[0],
    "parens": lambda parts: f"({parts[0]})",
    "whole": lambda parts: "[...]",
}
"""How `source` writes the trees whose brackets the parse tree drops."""
INDEX = IndexType()


def _extend(text: str, at: int, count: int, brackets: str, step: int) -> int:
    """`at` moved over `count` brackets (and the blanks between them)
    before it (step -1) or after it (step 1)."""
    while count > 0:
        k = at if step > 0 else at - 1
        while 0 <= k < len(text) and text[k] in " \t\r\n":
            k += step
        if not (0 <= k < len(text) and text[k] in brackets):
            break
        at, count = (k + 1 if step > 0 else k), count - 1
    return at


def children(tree: Tree) -> list[Any]:
    """A tree's children as the grammar shapes them: by position, a rule's
    tokens, subtrees and absent options (lark types each as any of them)."""
    return tree.children


def position(token: Token) -> tuple[int, int]:
    """A parsed token's line and column (lark's are optional, for tokens
    made by hand; the lexer's, and the ones made here, have them)."""
    return cast(int, token.line), cast(int, token.column)


def first_token(tree: Tree | Token | None) -> Token | None:
    """The first token under a parse tree: where its construct starts."""
    while isinstance(tree, Tree):
        tree = next((c for c in tree.children if c is not None), None)
    return tree


def last_token(tree: Tree | Token | None) -> Token | None:
    """The last token under a parse tree: where its construct ends."""
    while isinstance(tree, Tree):
        tree = next((c for c in reversed(tree.children) if c is not None), None)
    return tree


def _statement_loc(stmt: Tree) -> Tree | None:
    """A statement's `loc(...)`: its last child, or, for a `for` or `when`,
    the child before its body."""
    children = stmt.children
    if stmt.data in ("for_stmt", "when_stmt", "pipeline_stmt", "scope_stmt"):
        last = children[-2]
    else:
        last = children[-1] if children else None
    return last if isinstance(last, Tree) and last.data == "loc" else None


def unquote(token: Token) -> str:
    """A string literal's text; a backslash keeps the character after it."""
    return re.sub(r"\\(.)", r"\1", str(token)[1:-1])
