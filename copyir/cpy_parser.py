"""The authoring syntax (`.cpy`): lark parses, `_Builder` builds copy-dialect IR.

The builder resolves names and builds ops leniently: whatever the grammar
accepts and the IR can hold reaches the verifier, so `parse` then `verify`
reports every semantic error with the verifier's message. Only what the IR
cannot hold is rejected here: unknown dtypes and spaces, dimensions < 1,
slice steps, negative slice bounds, undefined and duplicate names.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)
from lark.lark import PostLex
from xdsl.dialects.builtin import (
    FileLineColLoc,
    IntAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from copyir import errors, pytree
from copyir.attributes import i64_array, segment_sizes
from copyir.dialects.copy import (
    BLOCKED,
    BUILT,
    ELEMENT,
    SQUEEZED,
    AllocOp,
    BlockDimAttr,
    BufferedCopyOp,
    BufferedRefOp,
    BufferedRefType,
    DmaOp,
    KernelOp,
    RefType,
    SemaphoreArrayType,
    SemaphoreOp,
    SemaphoreType,
    SemIndexOp,
    SyncCopyOp,
    ViewOp,
    expect_ref,
    sem_index_result_type,
    set_name,
    view_result_type,
)
from copyir.dtypes import BY_NAME, KNOWN_NAMES
from copyir.errors import CopyIRError, Loc, Note
from copyir.grammar_cache import grammar_cache
from copyir.hints import STATEMENT_WORDS, VALUE_WORDS, did_you_mean, habit
from copyir.locations import loc_of
from copyir.machine import memory_space

INT64 = range(-(2**63), 2**63)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_TOKEN_NAMES = {
    "NAME": "a name",
    "INT": "an integer",
    "STRING": "a string",
    "_NL": "end of line",
    "$END": "end of input",
}


class _Postlex(PostLex):
    """Drop newlines inside (), [] and pytree records, as Python does.

    A `{` right after `)` opens a kernel body, where newlines end statements;
    any other `{` opens a pytree record.
    """

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        stack: list[str] = []
        previous = None
        for token in stream:
            kind = token.type
            if kind == "_NL":
                if stack and stack[-1] != "body":
                    continue
            elif kind in ("LPAR", "LSQB"):
                stack.append(kind)
            elif kind == "LBRACE":
                stack.append("body" if previous == "RPAR" else "record")
            elif kind in ("RPAR", "RSQB", "RBRACE") and stack:
                stack.pop()
            previous = kind
            yield token


@functools.cache
def _lark() -> Lark:
    grammar = Path(__file__).with_name("grammar.lark").read_text(encoding="utf-8")
    return Lark(
        grammar,
        parser="lalr",
        postlex=_Postlex(),
        maybe_placeholders=True,
        cache=grammar_cache(grammar),
    )


def parse_cpy(text: str, filename: str = "<input>") -> ModuleOp:
    """Parse the authoring syntax into a module of copy kernels."""
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, filename, text) from None
    return _Builder(filename, text).module(tree)


def _syntax_error(err: UnexpectedInput, filename: str, text: str) -> CopyIRError:
    """lark's exception as a located diagnostic: `expected ...`."""
    line, col = max(err.line, 1), max(err.column, 1)
    if isinstance(err, UnexpectedCharacters):
        message = f"unexpected character {err.char!r}"
    elif isinstance(err, UnexpectedEOF):
        message = "unexpected end of input"
    else:
        token = err.token
        if token.type == "$END":
            message = "unexpected end of input"
            line, col = _end_position(err)
        elif token.type == "_NL":
            message = "unexpected end of line"
            line, col = token.line, token.column
        else:
            message = f"unexpected {token.value!r}"
    expected = sorted({_token_name(t) for t in getattr(err, "expected", ()) or ()})
    if expected:
        message += "; expected " + _one_of(expected)
    return CopyIRError(message, Loc(filename, line, col), _syntax_notes(err, text))


def _syntax_notes(err: UnexpectedInput, text: str) -> tuple[Note, ...]:
    """Hints for a syntax error: another language's habit, a misspelt
    keyword, a DMA without its semaphore."""
    offset = getattr(err, "pos_in_stream", None)
    if offset is not None and (notes := habit(text, offset)):
        return notes
    if isinstance(err, UnexpectedToken):
        return _misspelt_keyword(err, text) or _missing_semaphore(err)
    return ()


def _misspelt_keyword(err: UnexpectedToken, text: str) -> tuple[Note, ...]:
    """`kernal k(...)`, where a keyword was expected; or `copy_strat x ...`
    and `b = aloc ...`, a name where a statement or a value starts."""
    token = err.token
    if token.type == "NAME":
        keywords = [_keyword(name) for name in err.expected]
        if notes := did_you_mean(token.value, [k for k in keywords if k]):
            return notes
    previous = err.token_history[-1] if err.token_history else None
    if previous is None or previous.type != "NAME" or previous.start_pos is None:
        return ()
    line = text[text.rfind("\n", 0, previous.start_pos) + 1 : previous.start_pos]
    if "EQUAL" in err.expected and re.fullmatch(r"(.*[;{])?[ \t]*", line):
        return did_you_mean(previous.value, STATEMENT_WORDS)
    if re.fullmatch(r"(.*[;{])?[ \t]*[A-Za-z_]\w*[ \t]*=[ \t]*", line):
        return did_you_mean(previous.value, VALUE_WORDS)
    return ()


def _keyword(terminal: str) -> str | None:
    """The word a terminal stands for, if it is a keyword such as `kernel`."""
    try:
        pattern = _lark().get_terminal(terminal).pattern
    except KeyError:
        return None
    if pattern.type == "str" and _NAME.fullmatch(pattern.value):
        return pattern.value
    return None


def _missing_semaphore(err: UnexpectedToken) -> tuple[Note, ...]:
    """A DMA that ends after its destination: `, sem` would complete it."""
    if "COMMA" not in err.expected:
        return ()
    parser = err.interactive_parser.copy()
    try:
        parser.feed_token(Token("COMMA", ","))
        parser.feed_token(Token("NAME", "sem"))
        if err.token.type == "$END":
            parser.feed_eof()
        else:
            parser.feed_token(err.token)
    except UnexpectedInput:
        return ()
    return (Note(errors.HINT_NO_SEMAPHORE),)


def _end_position(err: UnexpectedInput) -> tuple[int, int]:
    token = err.token
    line = getattr(token, "line", None) or 1
    col = getattr(token, "column", None) or 1
    return line, col


def _token_name(name: str) -> str:
    if name in _TOKEN_NAMES:
        return _TOKEN_NAMES[name]
    try:
        pattern = _lark().get_terminal(name).pattern
    except KeyError:
        return name
    if pattern.type == "str":
        return repr(pattern.value)
    return name.lower()


def _one_of(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


class _Builder:
    """Builds copy-dialect ops from a lark parse tree, statement by statement."""

    def __init__(self, filename: str, text: str):
        self.filename = filename
        self.text = text
        self.names: dict[str, tuple[SSAValue, int]] = {}
        self.block: Block | None = None
        self.location: Attribute | None = None

    # -- helpers -----------------------------------------------------------

    def loc(self, item: Tree | Token) -> Loc:
        if isinstance(item, Token):
            return Loc(self.filename, item.line, item.column)
        token = _first_token(item)
        if token is None:
            return None
        return Loc(self.filename, token.line, token.column)

    def error(
        self, item: Tree | Token, message: str, notes: tuple[Note, ...] = ()
    ) -> CopyIRError:
        return CopyIRError(message, self.loc(item), notes)

    def integer(self, text: str, at: Token | None = None) -> int:
        """An integer literal that fits in 64 bits; `at` locates its error."""
        digits = text.lstrip("-")
        value = int(text) if len(digits) <= 19 else 2**63
        if value not in INT64:
            raise self.error(
                at if at is not None else text, errors.INT_RANGE.format(value=text)
            )
        return value

    def statement_location(self, stmt: Tree, loc_tree: Tree | None) -> Attribute:
        if loc_tree is not None:
            file, line, col = loc_tree.children
            location = FileLineColLoc(
                StringAttr(_unquote(file)),
                IntAttr(self.integer(line, line)),
                IntAttr(self.integer(col, col)),
            )
            if loc_of(location) is None:
                raise self.error(
                    loc_tree,
                    errors.MALFORMED_LOCATION.format(
                        why="it needs a file name, and a line and column from 1 up"
                    ),
                )
            return location
        token = _first_token(stmt)
        return FileLineColLoc(
            StringAttr(self.filename), IntAttr(token.line), IntAttr(token.column)
        )

    def emit(
        self,
        op_type: type[Operation],
        operands: Sequence[SSAValue] = (),
        result_types: Sequence[Attribute] = (),
        properties: dict[str, Attribute] | None = None,
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
            location=self.location,
        )
        self.block.add_op(op)
        return op

    def define(self, token: Token, value: SSAValue) -> None:
        self.define_alias(token, value)
        set_name(value, str(token))

    def define_alias(self, token: Token, value: SSAValue) -> None:
        name = str(token)
        if name in self.names:
            first = self.names[name][1]
            raise self.error(token, errors.DEFINED_TWICE.format(name=name, line=first))
        self.names[name] = (value, token.line)

    def lookup(self, token: Token) -> SSAValue:
        entry = self.names.get(str(token))
        if entry is None:
            raise self.error(
                token,
                errors.UNDEFINED.format(name=token),
                did_you_mean(str(token), [*self.names, *VALUE_WORDS]),
            )
        return entry[0]

    # -- module and kernels ------------------------------------------------

    def module(self, tree: Tree) -> ModuleOp:
        module = ModuleOp([self.kernel(k) for k in tree.children])
        BUILT.add(module)
        return module

    def kernel(self, tree: Tree) -> KernelOp:
        _, name, *params, loc_tree, body = tree.children
        params = [p for p in params if isinstance(p, Tree)]
        self.names = {}
        self.block = Block(arg_types=[self.type(p.children[1], "hbm") for p in params])
        for arg, param in zip(self.block.args, params, strict=True):
            self.define(param.children[0], arg)
            arg.location = self.statement_location(param, param.children[2])
        kernel = KernelOp.build(
            properties={"sym_name": StringAttr(str(name))},
            regions=[Region(self.block)],
        )
        kernel.location = self.statement_location(tree, loc_tree)
        for stmt in body.children:
            self.location = self.statement_location(stmt, _loc_of(stmt))
            getattr(self, stmt.data)(stmt)
        return kernel

    def type(self, tree: Tree, default_space: str) -> RefType:
        dtype_token, *dims, space_token = tree.children
        dtype = BY_NAME.get(str(dtype_token))
        if dtype is None:
            raise self.error(
                dtype_token,
                errors.UNKNOWN_DTYPE.format(dtype=dtype_token, known=KNOWN_NAMES),
                did_you_mean(str(dtype_token), BY_NAME),
            )
        space = default_space
        if space_token is not None:
            try:
                space = memory_space(str(space_token))
            except CopyIRError as err:
                raise err.at(self.loc(space_token)) from None
        shape = [self.integer(d) for d in dims if d is not None]
        try:
            return RefType(shape, dtype.ir, space)
        except CopyIRError as err:
            raise err.at(self.loc(tree)) from None

    # -- statements --------------------------------------------------------

    def assign(self, tree: Tree) -> None:
        target, rhs, _ = tree.children
        kind = rhs.data
        if kind == "alloc":
            op = self.emit(AllocOp, (), [self.type(rhs.children[0], "vmem")])
            self.define(target, op.results[0])
        elif kind == "semaphore":
            shape = [self.integer(d) for d in rhs.children if d is not None]
            type = SemaphoreArrayType(shape) if shape else SemaphoreType()
            op = self.emit(SemaphoreOp, (), [type])
            self.define(target, op.results[0])
        elif kind == "buffered_ref":
            op = self.emit(BufferedRefOp, (), [self.buffered_ref(rhs)])
            self.define(target, op.results[0])
        else:
            value = self.operand(rhs.children[0])
            if value.name_hint is None:
                self.define(target, value)
            else:  # another name for a named value: an alias, defined once too
                self.define_alias(target, value)

    def dma_stmt(self, tree: Tree) -> None:
        kind, src, dst, sem, *options = tree.children
        head = kind.children[0]
        label = "dma" if head == "dma" else str(head)
        options = self.options(options[:-1], label, {"add": "flag", "priority": "int"})
        if head == "dma":
            action = kind.children[1]
            action = _unquote(action) if action.type == "STRING" else str(action)
        else:
            action = "start" if head == "copy_start" else "wait"
        operands = [self.operand(src), self.operand(dst), self.operand(sem)]
        properties = DmaOp.option_properties(
            action, "add" in options, options.get("priority", 0)
        )
        self.emit(DmaOp, operands, (), properties)

    def sync_copy(self, tree: Tree) -> None:
        _, src, dst, *options = tree.children
        options = self.options(options[:-1], "sync_copy", {"add": "flag"})
        src_tree, srcs = pytree.flatten(self.tree(src, 0))
        dst_tree, dsts = pytree.flatten(self.tree(dst, 0))
        properties = SyncCopyOp.tree_properties(src_tree, dst_tree, "add" in options)
        properties["operandSegmentSizes"] = segment_sizes((len(srcs), len(dsts)))
        self.emit(SyncCopyOp, [*srcs, *dsts], (), properties)

    def buffered_copy(self, tree: Tree) -> None:
        _, src, dst, *options = tree.children
        options = self.options(options[:-1], "buffered_copy", {"slot": "int"})
        src_value, src_indices = self.bref_side(src)
        dst_value, dst_indices = self.bref_side(dst)
        properties = BufferedCopyOp.index_properties(
            src_indices, dst_indices, options.get("slot", 0)
        )
        properties["operandSegmentSizes"] = BufferedCopyOp.segments(0, False, False)
        self.emit(BufferedCopyOp, [src_value, dst_value], (), properties)

    # -- pieces ------------------------------------------------------------

    def buffered_ref(self, tree: Tree) -> BufferedRefType:
        array, *options = tree.children
        if isinstance(array, Tree):
            array_type = self.type(array, "hbm")
        else:
            value = self.lookup(array)
            try:
                array_type = expect_ref("buffered_ref", "array", value)
            except CopyIRError as err:
                raise err.at(self.loc(array)) from None
        known = {"block": "block", "buffers": "int", "space": "name"}
        values = self.options(options, "buffered_ref", known)
        if "block" not in values:
            raise self.error(
                tree,
                errors.OPTION_VALUE.format(
                    option="block", stmt="buffered_ref", why="is required"
                ),
            )
        space = values.get("space", "vmem")
        try:
            space = memory_space(space)
        except CopyIRError as err:
            raise err.at(self.loc(tree)) from None
        return BufferedRefType(
            array_type.get_shape(),
            array_type.element_type,
            values["block"],
            values.get("buffers", 2),
            space,
        )

    def options(self, trees: list[Tree], stmt: str, known: dict[str, str]) -> dict:
        """Options `name` or `name=value`, checked against what `stmt` takes."""
        values: dict[str, object] = {}
        for option in trees:
            name_token, value = option.children
            name = str(name_token)
            if name not in known:
                raise self.error(
                    name_token,
                    errors.UNKNOWN_OPTION.format(
                        option=name, stmt=stmt, known=_one_of(sorted(known))
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
        got = None if value is None else value.data
        wanted = {
            "flag": (None, "is a flag and takes no value"),
            "int": ("int_value", "takes an integer"),
            "name": ("name_value", "takes a name"),
            "block": ("block_value", "takes a block shape such as (128, 128)"),
        }[kind]
        if got != wanted[0]:
            raise self.error(
                name, errors.OPTION_VALUE.format(option=name, stmt=stmt, why=wanted[1])
            )
        if kind == "flag":
            return True
        if kind == "int":
            return self.integer(value.children[0])
        if kind == "name":
            return str(value.children[0])
        return [self.block_dim(d) for d in value.children if d is not None]

    def block_dim(self, tree: Tree) -> BlockDimAttr:
        if tree.data == "squeezed":
            return BlockDimAttr(SQUEEZED)
        kind = ELEMENT if tree.data == "element" else BLOCKED
        return BlockDimAttr(kind, self.integer(tree.children[0]))

    def bref_side(self, tree: Tree) -> tuple[SSAValue, list[int] | None]:
        name, indices = tree.children
        value = self.lookup(name)
        if indices is None:
            return value, None
        items = _subscript_items(indices)
        if any(kind != "index" for kind, _, _ in items):
            raise self.error(
                indices, f"Block indices must be integers: {name}{_expr(items)}"
            )
        return value, [self.integer(parts[0], at) for _, parts, at in items]

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
        """A name with subscripts: each `[...]` is a view (or a semaphore index)."""
        name, *groups = tree.children
        value = self.lookup(name)
        expr = str(name)
        for group in groups:
            items = _subscript_items(group)
            expr += _expr(items)
            value = self.subscript(value, items, expr)
        return value

    def subscript(self, value: SSAValue, items: list, expr: str) -> SSAValue:
        if isinstance(value.type, SemaphoreArrayType | SemaphoreType):
            indices = []
            for kind, parts, at in items:
                if kind != "index":
                    raise self.error(
                        at, f"Semaphore arrays take integer indices only: {expr}"
                    )
                indices.append(self.integer(parts[0], at))
            op = self.emit(
                SemIndexOp,
                [value],
                [sem_index_result_type(value.type, len(indices))],
                {"indices": i64_array(tuple(indices))},
            )
            return op.results[0]
        shape = value.type.get_shape() if isinstance(value.type, RefType) else ()
        subscripts = [
            self.view_subscript(item, shape[dim] if dim < len(shape) else 1, expr)
            for dim, item in enumerate(items)
        ]
        op = self.emit(
            ViewOp,
            [value],
            [view_result_type(value.type, subscripts)],
            ViewOp.subscript_properties(subscripts),
        )
        return op.results[0]

    def view_subscript(self, item, extent: int, expr: str) -> tuple[int, int, bool]:
        kind, parts, at = item
        if kind == "index":
            return (self.integer(parts[0], at), 1, True)
        start, stop, step = parts
        if step is not None:
            raise self.error(at, errors.SLICE_STEP.format(expr=expr))
        lo = 0 if start is None else self.integer(start, at)
        hi = extent if stop is None else self.integer(stop, at)
        for bound in (lo, hi):
            if bound < 0:
                raise self.error(
                    at, errors.NEGATIVE_INDEX.format(index=bound, expr=expr)
                )
        return (lo, hi - lo, False)


def _subscript_items(group: Tree | Token) -> list[tuple[str, list, Token]]:
    """Subscripts as ("index", [i], at) or ("slice", [start, stop, step], at).

    The same from a `subscripts` tree and from a SUBSCRIPTS token; missing
    parts are None, present ones are their text.
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
        at = _first_token(item) or _first_token(group)
        if isinstance(item, Token):  # block indices: bare integers
            items.append(("index", [str(item)], item))
        elif item.data == "index":
            items.append(("index", [str(item.children[0])], at))
        else:
            bounds = [None if t is None else str(t) for t in item.children]
            items.append(("slice", [*bounds, None, None, None][:3], at))
    return items


def _expr(items: list) -> str:
    """Subscripts written back as the user wrote them, for messages."""
    texts = []
    for kind, parts, _ in items:
        if kind == "index":
            texts.append(parts[0])
        else:
            start, stop, step = ("" if p is None else p for p in parts)
            texts.append(f"{start}:{stop}" + (f":{step}" if step else ""))
    return f"[{', '.join(texts)}]"


def _first_token(tree: Tree | Token) -> Token | None:
    """The first token under a parse tree: where its construct starts."""
    while isinstance(tree, Tree):
        tree = next((c for c in tree.children if c is not None), None)
    return tree


def _loc_of(stmt: Tree) -> Tree | None:
    last = stmt.children[-1] if stmt.children else None
    return last if isinstance(last, Tree) and last.data == "loc" else None


def _unquote(token: Token) -> str:
    """A string literal's text; a backslash keeps the character after it."""
    return re.sub(r"\\(.)", r"\1", str(token)[1:-1])


__all__ = ["parse_cpy"]
