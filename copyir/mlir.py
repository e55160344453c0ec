"""The MLIR form of copy programs, through xDSL's parser and printer.

xDSL's parser records a location only from explicit `loc(...)` text; ours
also gives every other op its own line and column in the `.mlir` file, from
a line table built once. xDSL's parse errors become located `CopyIRError`s
here, at the boundary.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import gc
import re
import struct
from io import StringIO

from xdsl.context import Context
from xdsl.dialects.builtin import (
    Builtin,
    FileLineColLoc,
    IntAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from copyir import errors
from copyir.dialects.copy import Copy, set_name
from copyir.dialects.dma import Dma
from copyir.dialects.scalar import Scalar
from copyir.errors import CopyIRError, Loc
from copyir.locations import loc_of


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while building or walking IR.

    IR is millions of small linked objects; collections triggered by their
    allocation cost more than half of a large parse. Nothing cyclic is freed
    late: the collector runs again on exit.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@functools.cache
def context() -> Context:
    """A context with every dialect copyir reads and writes."""
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Copy)
    ctx.load_dialect(Dma)
    ctx.load_dialect(Scalar)
    return ctx


class LineTable:
    """Offsets to 1-based (line, column), by bisection."""

    def __init__(self, text: str):
        self.starts = [0]
        start = text.find("\n")
        while start != -1:
            self.starts.append(start + 1)
            start = text.find("\n", start + 1)

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1


class _UnknownOp(ParseError):
    """An unregistered op, reported at the op rather than after its name."""


class _LocatingParser(Parser):
    """A parser that gives each op its line and column unless `loc(...)` does."""

    def __init__(self, text: str, filename: str):
        super().__init__(context(), text, filename)
        self.filename = filename
        self.lines = LineTable(text)

    def loc(self, offset: int) -> Loc:
        return Loc(self.filename, *self.lines.position(offset))

    def _register_ssa_definition(self, name, values, span) -> None:
        """Keep names whole (see `set_name`): `%out_1` stays `out_1`."""
        super()._register_ssa_definition(name, values, span)
        if SSAValue.is_valid_name(name):
            for value in values:
                set_name(value, name)

    def file_location(self, offset: int) -> FileLineColLoc:
        line, col = self.lines.position(offset)
        return FileLineColLoc(StringAttr(self.filename), IntAttr(line), IntAttr(col))

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        try:
            op = super().parse_operation()
        except ParseError as err:
            if err.msg.endswith("is not registered") and not isinstance(
                err, _UnknownOp
            ):
                # xDSL reports it at the token after the name; point at the op.
                span = Span(start, start + 1, self.lexer.input)
                raise _UnknownOp(span, err.msg) from None
            raise
        if loc_of(op.location) is None:  # none, or no usable file:line:col
            op.location = self.file_location(start)
        return op

    def _parse_block(self) -> Block:
        """A label xDSL cannot keep as a block's name (`^7`) is a parse
        error at the label, not the ValueError xDSL's name setter raises."""
        token = self._current_token
        label = token.text[1:]
        if (
            token.kind == MLIRTokenKind.CARET_IDENT
            and not Block.is_default_block_name(label)
            and not Block.is_valid_name(label)
        ):
            raise ParseError(token.span, errors.BLOCK_LABEL.format(label=token.text))
        return super()._parse_block()

    def parse_optional_argument(self, expect_type: bool = True):
        """Block arguments (kernel parameters) get their position too."""
        arg = super().parse_optional_argument(expect_type)
        if isinstance(arg, Parser.Argument):
            arg.location = self.file_location(arg.name.start)
        return arg


# Text that xDSL's lexer mishandles: an unterminated string makes its string
# regex backtrack exponentially, a non-ASCII digit passes its `isnumeric`
# test and then fails `int`, and a number of thousands of digits exceeds
# Python's conversion limit. One linear scan finds them first.
_SUSPECT = re.compile(r'//[^\n]*|"|[^\x00-\x7f]|[0-9]{1000,}')
_STRING = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')


def _check_lexable(text: str, filename: str) -> None:
    pos = 0
    while (match := _SUSPECT.search(text, pos)) is not None:
        found, start = match.group(), match.start()
        if found.startswith("//"):
            pos = match.end()
            continue
        if found == '"':
            string = _STRING.match(text, start)
            if string is not None:
                pos = string.end()
                continue
            message = "String literal not closed on its line"
        elif found[0] in "0123456789":
            message = errors.NUMBER_TOO_LONG
        else:
            message = f"unexpected character {found!r}"
        raise CopyIRError(message, Loc(filename, *LineTable(text).position(start)))


def parse_mlir(text: str, filename: str = "<input>") -> ModuleOp:
    """Parse the MLIR form of a copy program into a module."""
    _check_lexable(text, filename)
    try:
        parser = _LocatingParser(text, filename)
        with gc_paused():
            module = parser.parse_module()
    except ParseError as err:
        line, col = LineTable(text).position(err.span.start)
        raise CopyIRError(err.msg, Loc(filename, line, col)) from None
    except VerifyException as err:
        raise CopyIRError(str(err), parser.loc(parser.pos)) from None
    except CopyIRError as err:
        raise err.at(parser.loc(parser.pos)) from None
    except RecursionError:
        raise CopyIRError(errors.TOO_DEEP, parser.loc(parser.pos)) from None
    except struct.error:  # xDSL packs a dense array's integers unchecked
        raise CopyIRError(errors.ARRAY_INT_RANGE, parser.loc(parser.pos)) from None
    except NotImplementedError:  # xDSL's affine parser, on `d0 * d1`
        raise CopyIRError(errors.SEMI_AFFINE, parser.loc(parser.pos)) from None
    except ZeroDivisionError:  # xDSL's affine parser folds `1 mod 0`
        raise CopyIRError(errors.DIVIDES_BY_ZERO, parser.loc(parser.pos)) from None
    return module


class _ScopedPrinter(Printer):
    """xDSL's printer, with names scoped as the parser scopes them: a name
    defined by or in a loop or `when` is free again after it, so that two
    loops both print their index as `%i` (xDSL would print `%i_1`, which
    reads back as another name)."""

    def print_op(self, op: Operation) -> None:
        if not op.regions or op.results or op.get_traits_of_type(IsolatedFromAbove):
            super().print_op(op)
            return
        self._ssa_names.append(self._ssa_names[-1].copy())
        try:
            super().print_op(op)
        finally:
            self._ssa_names.pop()


def print_mlir(op: Operation, debuginfo: bool = True) -> str:
    """The MLIR form, with `loc(...)` on every op so that origins survive."""
    stream = StringIO()
    _ScopedPrinter(stream=stream, print_debuginfo=debuginfo).print_op(op)
    stream.write("\n")
    return stream.getvalue()
