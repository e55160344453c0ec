"""Mixed static/dynamic index lists, written once for every op that has one.

A list such as `[7, %i]` is a property of integers with `DYNAMIC` where an
index value stands, and a variadic operand of those values in order, as
`memref.subview` keeps its offsets (`xdsl.dialects.utils`). Views, semaphore
indices and a BufferedRef's block indices all read, print and check their
lists here; `IndexedOp` is the family of ops that pick part of a `source`
with one (`copy.view`, `copy.sem_index`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, TypeGuard, cast

from xdsl.dialects.builtin import I64, DenseArrayBase, IndexType
from xdsl.dialects.utils import print_dynamic_index_list
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    VariadicOperandVariable,
    irdl_custom_directive,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer

from copyir import errors
from copyir.attributes import i64_array
from copyir.errors import CopyIRError

from .base import CopyOp, describe, describe_type
from .types import DYNAMIC, Subscript, parse_i64

Index = int | SSAValue
"""One entry of a mixed index list: an integer, or the index value it takes."""


def mixed(static: Sequence[int], dynamic: Sequence[SSAValue]) -> list[Index | None]:
    """The list with each `DYNAMIC` replaced by the next value (None when
    the operands run out: malformed IR the verifier reports)."""
    if DYNAMIC not in static:  # most lists: no operands to look up
        return list(static)
    values = iter(dynamic)
    return [next(values, None) if i == DYNAMIC else i for i in static]


def all_given(indices: Sequence[Index | None]) -> TypeGuard[Sequence[Index]]:
    """Whether no operand ran out in a list from `mixed`."""
    return None not in indices


def index_text(index: Index) -> str:
    return describe(index) if isinstance(index, SSAValue) else str(index)


def parse_index(parser: Parser, dynamic: list[UnresolvedOperand]) -> int:
    """`7` or `%i` (which joins `dynamic` and gives `DYNAMIC`)."""
    operand = parser.parse_optional_unresolved_operand()
    if operand is None:
        return parse_i64(parser)
    dynamic.append(operand)
    return DYNAMIC


def parse_optional_index_list(
    parser: Parser, dynamic: list[UnresolvedOperand]
) -> list[int] | None:
    """`[7, %i]`, if there: its static list; its values join `dynamic`."""
    return parser.parse_optional_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parse_index(parser, dynamic)
    )


def print_index_list(
    printer: Printer, static: Sequence[int], dynamic: Sequence[SSAValue]
) -> None:
    print_dynamic_index_list(printer, DYNAMIC, dynamic, static)


def resolve_indices(
    parser: Parser, dynamic: Sequence[UnresolvedOperand]
) -> list[SSAValue]:
    return [parser.resolve_operand(d, IndexType()) for d in dynamic]


@irdl_custom_directive
class IndexList(CustomDirective):
    """`[7, %i]` in a declarative format: the static list (with `DYNAMIC`
    where a value stands) and the values, as xDSL's `DynamicIndexList`, but
    with 64-bit integers checked as every integer property's."""

    dynamic: VariadicOperandVariable
    static: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        dynamic: list[UnresolvedOperand] = []
        static = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parse_index(parser, dynamic)
        )
        self.dynamic.set(state, dynamic)
        self.static.set(state, i64_array(tuple(static)))
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        static = cast("DenseArrayBase[I64]", self.static.get(op))
        print_index_list(printer, static.get_values(), self.dynamic.get(op))


def subscript_text(offset: Index | None, size: int, dropped: bool) -> str:
    if isinstance(offset, SSAValue) or offset is None:
        name = "None" if offset is None else describe(offset)  # None: see `mixed`
        return name if dropped else f"ds({name}, {size})"
    return str(offset) if dropped else f"{offset}:{offset + size}"


def parse_subscript(parser: Parser, dynamic: list[UnresolvedOperand]) -> Subscript:
    """`5` (an index), `0:32` (a slice), `%i` or `ds(%o, 8)` (a dynamic index
    or slice) in the MLIR form of a view; dynamic ones join `dynamic`."""
    if parser.parse_optional_keyword("ds") is not None:
        parser.parse_punctuation("(")
        dynamic.append(parser.parse_unresolved_operand())
        parser.parse_punctuation(",")
        size = parse_i64(parser)
        parser.parse_punctuation(")")
        return (DYNAMIC, size, False)
    start = parse_index(parser, dynamic)
    if start == DYNAMIC or parser.parse_optional_punctuation(":") is None:
        return (start, 1, True)
    stop = parse_i64(parser)
    if parser.parse_optional_punctuation(":") is not None:
        parser.raise_error(errors.SLICE_STEP.format(expr=f"{start}:{stop}:..."))
    return (start, stop - start, False)


def check_subscript(
    name: str, expr: str, dim: int, extent: int, offset: int, size: int, dropped: bool
) -> None:
    """A static subscript within its dimension, or the message that says how
    it is not (a negative index, an index or slice past the end, an empty
    slice)."""
    if offset < 0:
        raise CopyIRError(errors.NEGATIVE_INDEX.format(index=offset, expr=expr))
    if dropped:
        if offset >= extent:
            raise CopyIRError(
                errors.INDEX_OUT_OF_BOUNDS.format(
                    index=offset, dim=dim, name=name, size=extent
                )
            )
        return
    if size < 1:
        raise CopyIRError(
            errors.EMPTY_SLICE.format(
                start=offset, stop=offset + size, dim=dim, expr=expr
            )
        )
    if offset + size > extent:
        raise CopyIRError(
            errors.SLICE_OUT_OF_BOUNDS.format(
                start=offset, stop=offset + size, dim=dim, name=name, size=extent
            )
        )


class IndexedOp(CopyOp):
    """An op that picks part of its `source` with a mixed index list,
    `%r = copy.<op> %source[...]`: a view, a semaphore index. A subclass
    says where its list is (`static_starts`, `dynamic_starts`) and what
    each entry picks (`subscripts`); the texts and checks are shared."""

    DYNAMIC_WORD: ClassVar[str] = "indices"
    """What the messages call the list's entries (`offsets` for a view)."""

    if TYPE_CHECKING:  # each subclass declares it, an operand
        source: SSAValue

    def static_starts(self) -> Sequence[int]:
        raise NotImplementedError

    def dynamic_starts(self) -> Sequence[SSAValue]:
        raise NotImplementedError

    def subscripts(self) -> list[Subscript]:
        raise NotImplementedError

    def starts(self) -> list[Index | None]:
        """Each subscript's start: an integer, or the index value it takes
        (None where the operands run out, see `mixed`)."""
        static = self.static_starts()
        if DYNAMIC not in static:  # most lists: no operands to look up
            return list(static)
        return mixed(static, self.dynamic_starts())

    def subscripts_text(self) -> str:
        texts = [
            subscript_text(start, size, dropped)
            for start, (_, size, dropped) in zip(
                self.starts(), self.subscripts(), strict=True
            )
        ]
        return f"[{', '.join(texts)}]"

    def expression(self) -> str:
        return describe(self.source) + self.subscripts_text()

    def result_text(self) -> str:
        return self.expression()

    def check_dynamic_count(self) -> None:
        """As many `DYNAMIC` entries as operands."""
        if list(self.static_starts()).count(DYNAMIC) != len(self.dynamic_starts()):
            self.malformed(f"its dynamic {self.DYNAMIC_WORD} and operands disagree")

    def check_rank(self, rank: int) -> None:
        """No more entries than the source has dimensions."""
        count = len(self.static_starts())
        if count > rank:
            raise CopyIRError(
                errors.TOO_MANY_INDICES.format(
                    name=describe(self.source), rank=rank, count=count
                )
            )

    def check_result(self, ok: bool, expected: Callable[[], Attribute]) -> None:
        """MALFORMED_VIEW naming the type `expected()` gives, unless `ok`
        (the type is built only for the message)."""
        if not ok:
            self.malformed(f"its type should be {describe_type(expected())}")

    def malformed(self, why: str) -> None:
        raise CopyIRError(
            errors.MALFORMED_VIEW.format(name=describe(self.source), why=why)
        )

    def subscript_error(
        self, dim: int, extent: int, offset: int, size: int, dropped: bool
    ) -> None:
        """Raise the error of a subscript that is known to be out of range."""
        check_subscript(
            describe(self.source), self.expression(), dim, extent, offset, size, dropped
        )
