"""The authoring syntax (`.cpy`): lark parses, `_Builder` builds copy-dialect IR.

The builder resolves names and builds ops leniently: whatever the grammar
accepts and the IR can hold reaches the verifier, so `parse` then `verify`
reports every semantic error with the verifier's message. Only what the IR
cannot hold is rejected here: unknown dtypes and spaces, dimensions < 1,
slice steps, negative slice bounds, undefined and duplicate names (a loop
index, a pipeline's window or grid index, or a name of a `for`, `when` or
`pipeline` body is visible in that body only; an index map's parameters
in its expressions only), index expressions that are not affine, slices
whose size is not static, operators a computation does not have, and a
pipeline's header that names the wrong number of windows or gives an
index map the wrong number of parameters. Expressions are translated by
`copyir.cpy_expressions`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
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
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    FileLineColLoc,
    IndexType,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap

from copyir import errors, pytree
from copyir.attributes import i64_array, segment_sizes
from copyir.compute import Apply, Operand, format_prefix
from copyir.cpy_expressions import (
    Affine,
    call_args,
    checked,
    computation,
    condition,
    in_print_order,
    is_bare_name,
    is_call,
    static_integer,
    strip_parens,
)
from copyir.dialects.copy import (
    BLOCKED,
    BUILT,
    DESCRIPTOR,
    DYNAMIC,
    ELEMENT,
    IN,
    OUT,
    SQUEEZED,
    AllocOp,
    AsyncCopyOp,
    AsyncDmaOp,
    BlockDimAttr,
    BufferedCopyOp,
    BufferedRefOp,
    BufferedRefType,
    ComputeOp,
    DescriptorType,
    DmaOp,
    ForOp,
    IndexOp,
    InvalidateOp,
    KernelOp,
    PipelineOp,
    RefType,
    SemaphoreArrayType,
    SemaphoreOp,
    SemaphoreType,
    SemIndexOp,
    Subscript,
    SyncCopyOp,
    ViewOp,
    WhenOp,
    WindowOp,
    describe,
    describe_type,
    expect_ref,
    sem_index_result_type,
    set_name,
    view_result_type,
)
from copyir.dtypes import BY_NAME, KNOWN_NAMES
from copyir.errors import CopyIRError, Loc, Note
from copyir.grammar_cache import grammar_cache
from copyir.hints import STATEMENT_WORDS, VALUE_WORDS, did_you_mean, habit
from copyir.index import INT64, format_expr
from copyir.locations import loc_of
from copyir.machine import memory_space

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_TOKEN_NAMES = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "AUGOP": "an augmented assignment such as '+='",
    "COMPARISON": "a comparison",
    "STRING": "a string",
    "_NL": "end of line",
    "$END": "end of input",
}


class _Postlex(PostLex):
    """Drop newlines inside (), [] and pytree records, as Python does, and
    in a pipeline's header (from `pipeline` to its body's `{`), whose specs
    go one per line.

    A `{` opens a body, where newlines end statements, when it ends a
    statement that starts with `kernel`, `for`, `when` or `pipeline` and is
    outside any bracket of that statement; any other `{` opens a pytree
    record.
    """

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        stack: list[str] = []
        head = None  # the first token of the statement being read
        for token in stream:
            kind = token.type
            if kind not in _LAYOUT:  # most tokens: only a statement's first counts
                if head is None and (not stack or stack[-1] == "body"):
                    head = kind
                yield token
                continue
            level = not stack or stack[-1] == "body"
            if kind == "_NL" or kind == "SEMICOLON":
                if kind == "_NL" and (not level or head == "PIPELINE"):
                    continue
                if level:
                    head = None
            elif kind == "LBRACE":
                body = level and head in _BODY_HEADS
                stack.append("body" if body else "record")
                head = None if body else head or kind
            elif kind == "LPAR" or kind == "LSQB":
                stack.append(kind)
                if head is None and level:
                    head = kind
            elif stack and stack.pop() == "body":
                head = kind  # the body's `}` ends its statement
            yield token


_BODY_HEADS = frozenset(("KERNEL", "FOR", "WHEN", "PIPELINE"))
_LAYOUT = frozenset(
    ("_NL", "SEMICOLON", "LPAR", "LSQB", "LBRACE", "RPAR", "RSQB", "RBRACE")
)


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
        elif token.type == "DMA_LINE":  # the word the general rule stops at
            message = f"unexpected {token.value.split(None, 1)[0]!r}"
        else:
            message = f"unexpected {token.value!r}"
    expected = sorted({_token_name(t) for t in _expected(err) - {"DMA_LINE"}})
    if expected:
        message += "; expected " + _one_of(expected)
    return CopyIRError(message, Loc(filename, line, col), _syntax_notes(err, text))


def _expected(err: UnexpectedInput) -> set[str]:
    """The terminals the parser would take where it stopped.

    LALR merges the states of one construct in different places, so lark's
    `expected` may list what fits only elsewhere (`and` inside a view's
    brackets); feeding each to a copy of the parser keeps the ones that fit.
    """
    expected = set(getattr(err, "expected", ()) or ())
    parser = getattr(err, "interactive_parser", None)
    if parser is None or not expected:
        return expected
    try:
        return expected & parser.accepts() or expected
    except UnexpectedInput:
        return expected


def _syntax_notes(err: UnexpectedInput, text: str) -> tuple[Note, ...]:
    """Hints for a syntax error: another language's habit, a misspelt
    keyword, a DMA without its semaphore."""
    offset = getattr(err, "pos_in_stream", None)
    expected = _expected(err) or set(getattr(err, "allowed", None) or ())
    ends = not expected or bool(expected & {"_NL", "SEMICOLON", "$END"})
    if offset is not None and (notes := habit(text, offset, ends)):
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
    """The word a terminal stands for, if it is a keyword such as `kernel`
    (or `in`, a word up to a word's end)."""
    try:
        pattern = _lark().get_terminal(terminal).pattern
    except KeyError:
        return None
    word = pattern.value.removesuffix("\\b") if pattern.type == "re" else pattern.value
    return word if _NAME.fullmatch(word) else None


def _missing_semaphore(err: UnexpectedToken) -> tuple[Note, ...]:
    """A DMA that ends after its destination: `, sem` would complete it."""
    if "COMMA" not in err.expected:
        return ()
    # The trial only feeds tokens: the parse trees on the stack are shared,
    # not copied (a deeply nested program's would exhaust the recursion).
    parser = err.interactive_parser.copy(deepcopy_values=False)
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
    if (word := _keyword(name)) is not None:
        return repr(word)
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


Where = tuple[Token, list, int]
"""An operand's name, its subscript groups, and the group being read."""


class _MapScope:
    """What an index map's expressions see: its parameters, as index values
    of their own, and nothing else (the builder lends its messages)."""

    def __init__(self, builder: _Builder, names: list[Token]):
        self.builder = builder
        block = Block(arg_types=[INDEX] * len(names))
        self.values = {str(n): v for n, v in zip(names, block.args, strict=True)}

    def lookup(self, token: Token) -> SSAValue:
        value = self.values.get(str(token))
        if value is None:
            params = f"({', '.join(self.values)})"
            raise self.error(
                token,
                errors.UNDEFINED.format(name=token),
                (Note(errors.INDEX_MAP_SCOPE.format(params=params)),),
            )
        return value

    def error(
        self, item: Tree | Token, message: str, notes: tuple[Note, ...] = ()
    ) -> CopyIRError:
        return self.builder.error(item, message, notes)

    def source(self, item: Tree | Token) -> str:
        return self.builder.source(item)

    def integer(self, text: str, at: Token | None = None) -> int:
        return self.builder.integer(text, at)


@dataclass
class _Scope:
    """A `for` or `when` body: the names defined in it go when it ends."""

    construct: str
    line: int
    names: list[str]


class _Builder:
    """Builds copy-dialect ops from a lark parse tree, statement by statement.

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
        self.location: Attribute | None = None
        # Inline views, semaphore indices and index values already made in
        # a block, by what they are: written again, they are the same value.
        self.made: dict[tuple, SSAValue] = {}
        self.sharing = True

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

    def source(self, item: Tree | Token) -> str:
        """The text a construct was written as, on one line, for messages.

        The parse tree keeps no brackets, so the text takes in those that
        match the ones it holds; a subscript group gets its own brackets.
        """
        if isinstance(item, Tree) and item.data in _SOURCE_FORMS:
            return _SOURCE_FORMS[item.data](
                ["" if c is None else self.source(c) for c in item.children]
            )
        first, last = _first_token(item), _last_token(item)
        if first is None or first.start_pos is None or last.end_pos is None:
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
            raise self.error(
                at if at is not None else text, errors.INT_RANGE.format(value=text)
            )
        return value

    def signed(self, tree: Tree) -> int:
        """A `signed` integer of the grammar: `8`, `-8`."""
        minus, digits = tree.children
        return self.integer(("-" if minus else "") + digits, digits)

    def statement_location(self, stmt: Tree, loc_tree: Tree | None) -> Attribute:
        if loc_tree is not None:
            file, line, col = loc_tree.children
            location = FileLineColLoc(
                StringAttr(_unquote(file)),
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
        token = _first_token(stmt)
        return FileLineColLoc(
            self.filename_attr, IntAttr(token.line), IntAttr(token.column)
        )

    def emit(
        self,
        op_type: type[Operation],
        operands: Sequence[SSAValue] = (),
        result_types: Sequence[Attribute] = (),
        properties: dict[str, Attribute] | None = None,
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
        self.block.add_op(op)
        return op

    def shared(self, key: tuple | None, make: Callable[[], SSAValue]) -> SSAValue:
        """An inline view, semaphore index or index value: the one written
        the same way (`key`) earlier in this block, or a new one, so that a
        `copy_wait` takes its `copy_start`'s views rather than copies (as
        MLIR's CSE would leave them: most ops of a large generated program
        are views). A None key, or a computation (which names each of its
        views as one input), always makes a new one."""
        if key is None or not self.sharing:
            return make()
        value = self.made.get(key)
        if value is None:
            value = self.made[key] = make()
        return value

    def text_key(self, value: SSAValue, subscripts: str) -> tuple:
        """Integer subscripts of a value are found again by their text
        before they are read (`operand`, `found`)."""
        return (self.block, value, subscripts)

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
        self.names[name] = (value, token.line)
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

    def open_scope(self, construct: str, token: Token, block: Block) -> Block:
        """Enter a body; returns the block to come back to."""
        if len(self.scopes) >= pytree.MAX_DEPTH:
            raise self.error(
                token, errors.NESTED_TOO_DEEP.format(limit=pytree.MAX_DEPTH)
            )
        self.scopes.append(_Scope(construct, token.line, []))
        outer, self.block = self.block, block
        return outer

    def close_scope(self, outer: Block) -> None:
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

    # -- module and kernels ------------------------------------------------

    def module(self, tree: Tree) -> ModuleOp:
        module = ModuleOp([self.kernel(k) for k in tree.children])
        BUILT.add(module)
        return module

    def kernel(self, tree: Tree) -> KernelOp:
        _, name, *params, loc_tree, body = tree.children
        params = [p for p in params if isinstance(p, Tree)]
        self.names, self.loop_lines, self.scopes, self.gone = {}, {}, [], {}
        self.block = Block(arg_types=[self.type(p.children[1], "hbm") for p in params])
        for arg, param in zip(self.block.args, params, strict=True):
            self.define(param.children[0], arg)
            arg.location = self.statement_location(param, param.children[2])
        kernel = KernelOp.build(
            properties={"sym_name": StringAttr(str(name))},
            regions=[Region(self.block)],
        )
        kernel.location = self.statement_location(tree, loc_tree)
        self.statements(body)
        return kernel

    def statements(self, body: Tree) -> None:
        for stmt in body.children:
            self.location = self.statement_location(stmt, _loc_of(stmt))
            getattr(self, stmt.data)(stmt)

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
        shape = [self.signed(d) for d in dims if d is not None]
        try:
            return RefType(shape, dtype.ir, space)
        except CopyIRError as err:
            raise err.at(self.loc(tree)) from None

    # -- statements --------------------------------------------------------

    def assign(self, tree: Tree) -> None:
        """`name = ...` defines a name; `x[...] = expr` computes into x."""
        target, rhs, _ = tree.children
        name, *subscripts = target.children
        kind = rhs.data
        if subscripts:
            if kind in _DEFINITIONS:
                raise self.error(
                    target,
                    errors.DEFINITION_TARGET.format(
                        what=_DEFINITIONS[kind], target=self.source(target)
                    ),
                )
            self.compute(target, rhs, None)
        elif kind == "alloc":
            op = self.emit(AllocOp, (), [self.type(rhs.children[0], "vmem")])
            self.define(name, op.results[0])
        elif kind == "semaphore":
            shape = [self.signed(d) for d in rhs.children if d is not None]
            type = SemaphoreArrayType(shape) if shape else SemaphoreType()
            op = self.emit(SemaphoreOp, (), [type])
            self.define(name, op.results[0])
        elif kind == "buffered_ref":
            op = self.emit(BufferedRefOp, (), [self.buffered_ref(rhs)])
            self.define(name, op.results[0])
        elif kind == "async_copy":
            operands = [self.operand(t) for t in rhs.children]
            op = self.emit(AsyncCopyOp, operands, [DESCRIPTOR])
            self.define(name, op.results[0])
        elif kind == "window":
            self.define(name, self.window(rhs))
        elif strip_parens(rhs).data == "operand":
            value = self.operand(strip_parens(rhs), named=True)
            if value.name_hint is None:
                self.define(name, value)
            else:  # another name for a named value: an alias, defined once too
                self.define_alias(name, value)
        else:  # an index value: `slot = i % 2`
            hint = (Note(errors.HINT_COMPUTE.format(name=name)),)
            affine = Affine(self, hint)
            expr = checked(self, rhs, affine.expr(rhs))
            (expr,), dims = in_print_order([expr], affine.dims)
            op = self.emit(IndexOp, dims, [INDEX], {"map": _map(expr, len(dims))})
            self.define(name, op.results[0])

    def augassign(self, tree: Tree) -> None:
        """`acc += x` is `acc[...] = acc + x`, with acc evaluated once."""
        target, operator, rhs, _ = tree.children
        self.compute(target, rhs, _AUGMENTED[str(operator)])

    def compute(self, target: Tree, rhs: Tree, augmented: str | None) -> None:
        """A computation: the destination's views, then the inputs' views in
        the order the expression names them (`$k` is the k-th distinct
        input value)."""
        self.sharing = False
        try:
            self.build_compute(target, rhs, augmented)
        finally:
            self.sharing = True

    def build_compute(self, target: Tree, rhs: Tree, augmented: str | None) -> None:
        dst = self.operand(target)
        inputs = [dst] if augmented else []

        def input_number(tree: Tree) -> int:
            value = self.operand(tree)
            if isinstance(value.type, IndexType):
                raise self.error(
                    tree, errors.COMPUTE_INDEX_VALUE.format(name=self.source(tree))
                )
            for number, known in enumerate(inputs):
                if known is value:
                    return number
            inputs.append(value)
            return len(inputs) - 1

        expression = computation(self, rhs, input_number)
        if augmented:
            expression = Apply(augmented, (Operand(0), expression))
        self.emit(
            ComputeOp,
            [dst, *inputs],
            (),
            {"expression": StringAttr(format_prefix(expression))},
        )

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

    def dma_line(self, tree: Tree) -> None:
        """A DMA_LINE token: the `dma_stmt` it holds, its parts located."""
        (line,) = tree.children
        match = _DMA_LINE.match(line)
        found = [self.found(match.group(k), match.group(k + 1)) for k in (2, 4, 6)]
        if None not in found:  # all written before: nothing to make or locate
            action = "start" if match.group(1) == "copy_start" else "wait"
            self.emit(DmaOp, found, (), DmaOp.option_properties(action, False, 0))
            return
        kind = Tree("dma_kind", [_part(line, match, 1, "DMA_KIND")])
        operands = [
            Tree(
                "operand",
                [
                    _part(line, match, group, type)
                    for group, type in ((k, "NAME"), (k + 1, "SUBSCRIPTS"))
                    if match.group(group) is not None
                ],
            )
            for k in (2, 4, 6)
        ]
        self.dma_stmt(Tree("dma_stmt", [kind, *operands, None]))

    def found(self, name: str, subscripts: str | None) -> SSAValue | None:
        """The value of an operand that names a visible value with integer
        subscripts written so before in this block (as `operand` finds it
        by its text), or None."""
        entry = self.names.get(name)
        if entry is None or subscripts is None:
            return None if entry is None else entry[0]
        return self.made.get(self.text_key(entry[0], subscripts))

    def sync_copy(self, tree: Tree) -> None:
        _, src, dst, *options = tree.children
        options = self.options(options[:-1], "sync_copy", {"add": "flag"})
        src_tree, srcs = pytree.flatten(self.tree(src, 0))
        dst_tree, dsts = pytree.flatten(self.tree(dst, 0))
        properties = SyncCopyOp.tree_properties(src_tree, dst_tree, "add" in options)
        properties["operandSegmentSizes"] = segment_sizes((len(srcs), len(dsts)))
        self.emit(SyncCopyOp, [*srcs, *dsts], (), properties)

    def buffered_copy(self, tree: Tree) -> None:
        """`buffered_copy [start|wait] src -> dst[, sem], slot=s`: the block
        indices' values first, then the semaphore's, then the slot's."""
        _, action, src, dst, *items = tree.children
        items = items[:-1]
        if action is not None:
            word = action.children[0]
            action = _unquote(word) if word.type == "STRING" else str(word)
        dynamic: list[SSAValue] = []
        src_value, src_indices = self.bref_side(src, dynamic)
        dst_value, dst_indices = self.bref_side(dst, dynamic)
        positional = [item for item in items if item.data == "operand"]
        if len(positional) > 1 or (positional and positional[0] is not items[0]):
            extra = positional[1] if len(positional) > 1 else positional[0]
            raise self.error(
                extra, errors.WINDOW_EXTRA_ITEM.format(expr=self.source(extra))
            )
        if action is not None and not positional:
            raise self.error(tree, errors.WINDOW_NO_SEMAPHORE.format(action=action))
        sem = self.operand(positional[0]) if positional else None
        options = [item for item in items if item.data == "option"]
        slot = self.options(options, "buffered_copy", {"slot": "index"}).get("slot", 0)
        properties = BufferedCopyOp.index_properties(
            src_indices, dst_indices, slot if isinstance(slot, int) else 0
        )
        if action is not None:
            properties["action"] = StringAttr(action)
        dynamic_slot = [slot] if isinstance(slot, SSAValue) else []
        properties["operandSegmentSizes"] = BufferedCopyOp.segments(
            len(dynamic), bool(dynamic_slot), sem is not None
        )
        operands = [src_value, dst_value, *dynamic, *dynamic_slot]
        self.emit(BufferedCopyOp, [*operands, *([sem] if sem else [])], (), properties)

    def window(self, tree: Tree) -> SSAValue:
        """`window bx[s]`: slot s of the BufferedRef's window, as a ref."""
        name, slot_tree = tree.children
        bref = self.lookup(name)
        if not isinstance(bref.type, BufferedRefType):
            raise self.error(
                name,
                errors.EXPECTED_BUFFERED_REF.format(
                    op="window",
                    role="its window",
                    name=name,
                    type=describe_type(bref.type),
                ),
            )
        slot = self.index_value(slot_tree)
        properties = {"slot": IntegerAttr(slot, i64)} if isinstance(slot, int) else {}
        operands = [bref] if isinstance(slot, int) else [bref, slot]
        op = self.emit(WindowOp, operands, [WindowOp.slot_type(bref.type)], properties)
        return op.results[0]

    def invalidate(self, tree: Tree) -> None:
        """`invalidate w`: the ref's memory is unwritten again."""
        _, target, _ = tree.children
        self.emit(InvalidateOp, [self.operand(target)], ())

    def method_call(self, tree: Tree) -> None:
        """`c.start(add, priority=1)`, `c.wait()`: the method is the action,
        checked by the verifier like every action."""
        name, method, *options = tree.children
        options = [o for o in options[:-1] if o is not None]
        call = f"{name}.{method}()"
        value = self.lookup(name)
        if not isinstance(value.type, DescriptorType):
            raise self.error(
                name,
                errors.NOT_A_DESCRIPTOR.format(
                    call=call, name=name, type=describe_type(value.type)
                ),
            )
        values = self.options(options, call, {"add": "flag", "priority": "int"})
        properties = DmaOp.option_properties(
            str(method), "add" in values, values.get("priority", 0)
        )
        self.emit(AsyncDmaOp, [value], (), properties)

    def for_stmt(self, tree: Tree) -> None:
        """`for i in range(8)`, `for i in range(a, b)`, `for i, j in grid(8,
        3)`: one copy.for whose body's arguments are the indices."""
        for_token, names_tree, range_tree, *rest = tree.children
        options, body = rest[:-2], rest[-1]
        lower, upper, grid = self.loop_bounds(range_tree)
        names = names_tree.children
        if len(names) != len(upper):
            raise self.error(
                names_tree,
                errors.LOOP_INDEX_COUNT.format(
                    range=self.source(range_tree), dims=len(upper), count=len(names)
                ),
            )
        properties: dict[str, Attribute] = {
            "lower": i64_array(tuple(lower)),
            "upper": i64_array(tuple(upper)),
        }
        if grid:
            properties["grid"] = UnitAttr()
        parallel = self.options(options, "for", {"parallel": "dims"}).get("parallel")
        if parallel is not None:
            properties["parallel"] = i64_array(tuple(parallel))
        block = Block(arg_types=[INDEX] * len(names))
        self.emit(ForOp, (), (), properties, [Region(block)])
        outer = self.open_scope("loop", for_token, block)
        for arg, token in zip(block.args, names, strict=True):
            self.define(token, arg)
            self.loop_lines[str(token)] = (for_token.line, "loop")
        self.statements(body)
        self.close_scope(outer)

    def loop_bounds(self, tree: Tree) -> tuple[list[int], list[int], bool]:
        """(lower, upper, is a grid) of `range(...)` or `grid(...)`."""
        function, *args = tree.children
        args = [a for a in args if a is not None]
        bounds = [
            static_integer(self, a, f"A bound of {self.source(tree)}") for a in args
        ]
        if function == "range" and len(bounds) in (1, 2):
            return ([0] if len(bounds) == 1 else bounds[:1]), bounds[-1:], False
        if function == "grid" and bounds:
            return [0] * len(bounds), bounds, True
        raise self.error(
            tree,
            errors.LOOP_RANGE.format(expr=self.source(tree)),
            did_you_mean(str(function), ["range", "grid"]),
        )

    def pipeline_stmt(self, tree: Tree) -> None:
        """`pipeline grid=(8, 3) in x block=(128, 128) index=(i, j) -> (i, j)
        buffers=3 out y ... (xw, yw, i, j) { ... }`: one copy.pipeline whose
        body's arguments are the windows, then the grid indices (named here
        only when the header names them)."""
        token, *items = tree.children
        names_tree, _, body = items[-3:]
        specs = [i for i in items[:-3] if i.data in _SPECS]
        options = [i for i in items[:-3] if i.data not in _SPECS]
        properties = self.pipeline_options(token, options)
        rank = len(properties["grid"].get_values())
        refs, parts = [], []
        for spec in specs:
            ref, *part = self.pipeline_spec(spec, rank)
            refs.append(ref)
            parts.append(part)
        directions, blocks, maps, buffers = zip(*parts, strict=True)
        properties |= {
            "directions": i64_array(directions),
            "blocks": ArrayAttr(ArrayAttr(b) for b in blocks),
            "index_maps": ArrayAttr(maps),
            "buffers": i64_array(buffers),
        }
        names = [n for n in names_tree.children if n is not None]
        if len(names) not in (len(refs), len(refs) + rank):
            raise self.error(
                names[0] if names else token,
                errors.PIPELINE_BODY_NAMES.format(
                    count=len(names), windows=len(refs), rank=rank
                ),
            )
        types = [ref.type for ref in refs]
        windows = PipelineOp.window_types(types, properties["blocks"].data)
        block = Block(arg_types=[*windows, *[INDEX] * rank])
        self.emit(PipelineOp, refs, (), properties, [Region(block)])
        outer = self.open_scope("pipeline", token, block)
        for arg, name in zip(block.args, names, strict=False):
            self.define(name, arg)
        for name in names[len(refs) :]:
            self.loop_lines[str(name)] = (token.line, "pipeline")
        self.statements(body)
        self.close_scope(outer)

    def pipeline_options(self, token: Token, options: list[Tree]) -> dict:
        """`grid=(8, 3)`, `dimension_semantics=(parallel, arbitrary)` (the
        parallel dimensions; the verifier wants them a prefix),
        `no_pipelining`: the op's properties."""
        values = self.options(options, "pipeline", _PIPELINE_OPTIONS)
        grid = values.get("grid")
        if grid is None:
            raise self.error(
                token,
                errors.OPTION_VALUE.format(
                    option="grid", stmt="pipeline", why="is required"
                ),
            )
        properties: dict[str, Attribute] = {"grid": i64_array(tuple(grid))}
        semantics = values.get("dimension_semantics")
        if semantics is not None:
            dims = self.parallel_dims(token, semantics, grid)
            properties["parallel"] = i64_array(dims)
        if "no_pipelining" in values:
            properties["no_pipelining"] = UnitAttr()
        return properties

    def parallel_dims(
        self, token: Token, semantics: list[Token], grid: list[int]
    ) -> tuple[int, ...]:
        """The dimensions that `dimension_semantics` calls parallel."""
        for name in semantics:
            if name not in _SEMANTICS:
                raise self.error(
                    name,
                    errors.DIMENSION_SEMANTICS.format(name=name),
                    did_you_mean(str(name), _SEMANTICS),
                )
        if len(semantics) != len(grid):
            raise self.error(
                semantics[0] if semantics else token,
                errors.DIMENSION_SEMANTICS_COUNT.format(
                    count=len(semantics), rank=len(grid)
                ),
            )
        return tuple(k for k, name in enumerate(semantics) if name == "parallel")

    def pipeline_spec(self, spec: Tree, rank: int) -> tuple:
        """`in x block=(...) index=(i, j) -> (...) buffers=3`: the ref, its
        direction, block dims, index map and buffer count."""
        output = spec.data == "out_spec"
        name, *items = spec.children[1:] if output else spec.children
        ref = self.lookup(name)
        label = f"{'out' if output else 'in'} {name}"
        values = self.options(items, label, _SPEC_OPTIONS)
        for required in ("block", "index"):
            if required not in values:
                raise self.error(
                    name,
                    errors.OPTION_VALUE.format(
                        option=required, stmt=label, why="is required"
                    ),
                )
        self.check_window(ref, values["block"], name)
        index_map = self.index_map(values["index"], rank, str(name))
        direction = OUT if output else IN
        return ref, direction, values["block"], index_map, values.get("buffers", 2)

    def check_window(self, ref: SSAValue, block: list, at: Token) -> None:
        """A block size below 1 makes no window (no ref has an empty
        dimension), so the IR cannot hold it: the verifier's message for
        that block, here."""
        if all(b.kind.data == SQUEEZED or b.size.data >= 1 for b in block):
            return
        try:
            type = expect_ref("pipeline", "operand", ref)
            shape, element = type.get_shape(), type.element_type
            bref = BufferedRefType(shape, element, block, 2, "vmem")
            BufferedRefOp.check_type(bref, describe(ref))
        except CopyIRError as err:
            raise err.at(self.loc(at)) from None

    def index_map(self, tree: Tree, rank: int, ref: str) -> AffineMapAttr:
        """`(i, j) -> (i, 0)`, `i -> (i, 0)`: a lambda from the grid indices
        to block indices; its results are index expressions over its
        parameters, which nothing outside it sees."""
        option, params, *results = tree.children
        names = self.map_parameters(params, ref)
        if len(names) != rank:
            raise self.error(
                params if names else option,  # `()` has no token of its own
                errors.INDEX_MAP_ARITY.format(name=ref, count=len(names), rank=rank),
            )
        scope = _MapScope(self, names)
        affine = Affine(scope)
        affine.dims = list(scope.values.values())
        exprs = [checked(self, r, affine.expr(r)) for r in results if r is not None]
        return AffineMapAttr(AffineMap(rank, 0, tuple(exprs)))

    def map_parameters(self, params: Tree | Token, ref: str) -> list[Token]:
        """An index map's parameters: `i`, `(i)` or `(i, j)`, each a name
        once."""
        if isinstance(params, Token):
            return [params]
        if params.data == "tuple_value":
            items = [c for c in params.children if c is not None]
        else:
            items = [params]
        names: list[Token] = []
        for item in items:
            if not is_bare_name(item):
                raise self.error(
                    item, errors.INDEX_MAP_PARAMETER.format(expr=self.source(item))
                )
            name = strip_parens(item).children[0]
            if name in names:
                raise self.error(
                    name, errors.INDEX_MAP_TWICE.format(name=ref, param=name)
                )
            names.append(name)
        return names

    def when_stmt(self, tree: Tree) -> None:
        """`when <condition> { ... }`: a copy.when over the index values the
        condition names, its condition an or of affine sets."""
        when_token, cond, _, body = tree.children
        sets, dims = condition(self, cond)
        block = Block()
        properties = {"condition": ArrayAttr([AffineSetAttr(s) for s in sets])}
        self.emit(WhenOp, dims, (), properties, [Region(block)])
        outer = self.open_scope("when", when_token, block)
        self.statements(body)
        self.close_scope(outer)

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
            name_token = option.children[0]
            # An index map's value is its whole lambda.
            value = option if option.data == "index_map" else option.children[1]
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
        """An option's value as its kind wants it: a flag takes none; an
        int a literal; an index an index expression; a name a bare name; a
        block shape or a list of dimensions a tuple."""
        if kind == "flag" and value is None:
            return True
        if value is not None and (value.data == "index_map") != (kind == "map"):
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
            if kind == "int" and (literal := _int_literal(value)) is not None:
                return self.integer(literal, _first_token(value))
            if kind == "index":
                literal = _int_literal(value)
                if literal is not None:  # most slots: no index expression to fold
                    return self.integer(literal, _first_token(value))
                return self.index_value(value)
            if kind == "name" and is_bare_name(value):
                return str(strip_parens(value).children[0])
            if kind in ("block", "dims") and value.data == "parens":
                value = Tree("tuple_value", [strip_parens(value)])
            elif kind == "dims" and _int_literal(value) is not None:
                value = Tree("tuple_value", [value])
        if value is not None and value.data == "tuple_value":
            items = [item for item in value.children if item is not None]
            if kind == "block":
                return [self.block_dim(name, stmt, item) for item in items]
            if kind == "dims" and all(_int_literal(i) is not None for i in items):
                return [self.integer(_int_literal(i), _first_token(i)) for i in items]
        raise self.option_error(name, stmt, kind)

    def option_error(self, name: Token, stmt: str, kind: str) -> CopyIRError:
        why = {
            "flag": "is a flag and takes no value",
            "int": "takes an integer",
            "index": "takes an index expression",
            "name": "takes a name",
            "block": "takes a block shape such as (128, 128)",
            "dims": "takes dimensions such as (0, 1)",
            "grid": "takes a grid such as (8, 3)",
            "names": "takes dimension semantics such as (parallel, arbitrary)",
            "map": "takes an index map such as (i, j) -> (i, j)",
        }[kind]
        return self.error(
            name, errors.OPTION_VALUE.format(option=name, stmt=stmt, why=why)
        )

    def block_dim(self, name: Token, stmt: str, tree: Tree) -> BlockDimAttr:
        """`128` (Blocked), `Blocked(128)`, `Element(48)` or `None` (squeezed)."""
        if is_bare_name(tree) and strip_parens(tree).children[0] == "None":
            return BlockDimAttr(SQUEEZED)
        if (literal := _int_literal(tree)) is not None:
            return BlockDimAttr(BLOCKED, self.integer(literal, _first_token(tree)))
        if tree.data == "call" and len(args := call_args(tree)) == 1:
            function = str(tree.children[0])
            literal = _int_literal(args[0])
            if function in _BLOCK_KINDS and literal is not None:
                size = self.integer(literal, _first_token(args[0]))
                return BlockDimAttr(_BLOCK_KINDS[function], size)
            notes = did_you_mean(function, _BLOCK_KINDS)
        else:
            notes = ()
        raise self.error(
            tree,
            errors.OPTION_VALUE.format(
                option=name, stmt=stmt, why="takes a block shape such as (128, 128)"
            ),
            notes,
        )

    def bref_side(
        self, tree: Tree, dynamic: list[SSAValue]
    ) -> tuple[SSAValue, list[int] | None]:
        """A side of a buffered_copy: a name, and block indices (DYNAMIC for
        an index value, which joins `dynamic`)."""
        name, indices = tree.children
        value = self.lookup(name)
        if indices is None:
            return value, None
        items = _subscript_items(indices)
        if any(kind != "index" for kind, _, _ in items):
            raise self.error(
                indices,
                f"Block indices must be integers: {name}{self.items_text(items)}",
            )
        return value, [
            self.dynamic_part(parts[0], at, dynamic) for _, parts, at in items
        ]

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

    def operand(self, tree: Tree, named: bool = False) -> SSAValue:
        """A name with subscripts: each `[...]` is a view (or a semaphore
        index); `[...]` alone is the whole ref. A view written as an earlier
        one of the same block was is that view (see `shared`), except the
        last of an operand that a statement names: `v = x[0]` is v's own."""
        name, *groups = tree.children
        value = self.lookup(name)
        for k, group in enumerate(groups):
            if type(group) is Tree and group.data == "whole":
                continue
            own = named and k == len(groups) - 1
            where = (name, groups, k)
            if own or type(group) is not Token:
                value = self.subscript(value, _subscript_items(group), where, own)
            else:  # integer subscripts: found again by their text, unread
                value = self.shared(
                    self.text_key(value, str(group)),
                    lambda v=value, g=group, w=where: self.subscript(
                        v, _subscript_items(g), w
                    ),
                )
        return value

    def written(self, where: Where) -> str:
        """An operand as written up to a subscript group, for messages (only
        they need it: most views never make one)."""
        name, groups, last = where
        texts = [str(name)]
        for group in groups[: last + 1]:
            if isinstance(group, Token):
                texts.append(self.items_text(_subscript_items(group)))
            else:
                texts.append("[...]" if group.data == "whole" else self.source(group))
        return "".join(texts)

    def subscript(
        self, value: SSAValue, items: list, where: Where, named: bool = False
    ) -> SSAValue:
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
            key = (self.block, SemIndexOp, value, *dynamic, *indices)
            return self.shared(
                None if named else key,
                lambda: self.emit(
                    SemIndexOp,
                    [value, *dynamic],
                    [sem_index_result_type(value.type, len(indices))],
                    {"indices": i64_array(tuple(indices))},
                ).results[0],
            )
        shape = value.type.get_shape() if isinstance(value.type, RefType) else ()
        subscripts = [
            self.view_subscript(
                item, shape[dim] if dim < len(shape) else 1, where, dynamic
            )
            for dim, item in enumerate(items)
        ]
        key = (self.block, ViewOp, value, *dynamic, *subscripts)
        return self.shared(
            None if named else key,
            lambda: self.emit(
                ViewOp,
                [value, *dynamic],
                [view_result_type(value.type, subscripts)],
                ViewOp.subscript_properties(subscripts),
            ).results[0],
        )

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
        dynamic.append(value)
        return DYNAMIC

    def index_value(self, tree: Tree) -> int | SSAValue:
        """An index expression: an integer when it folds to one, the value a
        bare name names, or a new copy.index."""
        affine = Affine(self)
        expr = checked(self, tree, affine.expr(tree))
        if isinstance(expr, AffineConstantExpr):
            return expr.value
        (expr,), dims = in_print_order([expr], affine.dims)
        return self.index_of(expr, dims)

    def index_of(self, expr: AffineExpr, dims: list[SSAValue]) -> SSAValue:
        if isinstance(expr, AffineDimExpr):
            return dims[expr.position]
        return self.shared(
            (self.block, IndexOp, expr, *dims),
            lambda: self.emit(
                IndexOp, dims, [INDEX], {"map": _map(expr, len(dims))}
            ).results[0],
        )

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


_SOURCE_FORMS = {
    "subscripts": lambda parts: f"[{', '.join(parts)}]",
    "slice": lambda parts: ":".join(parts[:2] + [p for p in parts[2:] if p]),
    "index": lambda parts: parts[0],
    "parens": lambda parts: f"({parts[0]})",
}
"""How `source` writes the trees whose brackets the parse tree drops."""
_DEFINITIONS = {
    "alloc": "alloc",
    "semaphore": "semaphore",
    "buffered_ref": "buffered_ref",
    "async_copy": "async_copy",
    "window": "window",
}
_AUGMENTED = {"+=": "add", "-=": "sub", "*=": "mul", "/=": "div"}
_SPECS = frozenset(("in_spec", "out_spec"))
_PIPELINE_OPTIONS = {
    "grid": "grid",
    "dimension_semantics": "names",
    "no_pipelining": "flag",
}
_SPEC_OPTIONS = {"block": "block", "index": "map", "buffers": "int"}
_SEMANTICS = ("parallel", "arbitrary")
_BLOCK_KINDS = {"Blocked": BLOCKED, "Element": ELEMENT}
INDEX = IndexType()


def _map(expr: AffineExpr, dims: int) -> AffineMapAttr:
    return AffineMapAttr(AffineMap(dims, 0, (expr,)))


def _fold(expr: AffineExpr, dims: int) -> AffineExpr:
    """The expression simplified (terms collected), when xDSL can."""
    try:
        return expr.simplify(dims, 0)
    except Exception:
        return expr


def _int_literal(tree: Tree | Token) -> str | None:
    """`8` or `-8` (a literal, not an expression), as text; else None."""
    tree = strip_parens(tree)
    if not isinstance(tree, Tree):
        return None
    if tree.data == "int":
        return str(tree.children[0])
    if tree.data == "neg":
        inner = strip_parens(tree.children[-1])
        if isinstance(inner, Tree) and inner.data == "int":
            return "-" + inner.children[0]
    return None


def _subscript_items(group: Tree | Token) -> list[tuple[str, list, Token]]:
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


_DMA_LINE = re.compile(
    r"(copy_start|copy_wait)\s+(\w+)(\[[^]]*\])?\s*->\s*(\w+)(\[[^]]*\])?"
    r"\s*,\s*(\w+)(\[[^]]*\])?"
)
"""A DMA_LINE token's parts: kind, then a name and subscripts per operand."""


def _part(line: Token, match: re.Match, group: int, kind: str) -> Token:
    """A part of a one-line token as the token it would have been."""
    start, end = match.span(group)
    return Token(
        kind,
        match.group(group),
        line.start_pos + start,
        line.line,
        line.column + start,
        line.line,
        line.column + end,
        line.start_pos + end,
    )


def _first_token(tree: Tree | Token) -> Token | None:
    """The first token under a parse tree: where its construct starts."""
    while isinstance(tree, Tree):
        tree = next((c for c in tree.children if c is not None), None)
    return tree


def _last_token(tree: Tree | Token) -> Token | None:
    """The last token under a parse tree: where its construct ends."""
    while isinstance(tree, Tree):
        tree = next((c for c in reversed(tree.children) if c is not None), None)
    return tree


def _loc_of(stmt: Tree) -> Tree | None:
    """A statement's `loc(...)`: its last child, or, for a `for` or `when`,
    the child before its body."""
    children = stmt.children
    if stmt.data in ("for_stmt", "when_stmt", "pipeline_stmt"):
        last = children[-2]
    else:
        last = children[-1] if children else None
    return last if isinstance(last, Tree) and last.data == "loc" else None


def _unquote(token: Token) -> str:
    """A string literal's text; a backslash keeps the character after it."""
    return re.sub(r"\\(.)", r"\1", str(token)[1:-1])


__all__ = ["parse_cpy"]
