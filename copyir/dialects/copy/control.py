"""Control flow: counted loops and grids (`copy.for`), index values affine
in loop indices (`copy.index`) and conditions on them (`copy.when`)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    UnitAttr,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.ir.affine import AffineMap, AffineSet
from xdsl.irdl import (
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator, Pure

from copyir import errors
from copyir.attributes import i64_array, int_values
from copyir.errors import CopyIRError

from .base import CopyOp, check_evaluable, describe, set_name
from .types import parse_i64


def grid_not_positive(grid: Sequence[int]) -> CopyIRError:
    """GRID_NOT_POSITIVE, the grid spelled as a Python tuple."""
    text = ", ".join(map(str, grid)) + ("," if len(grid) == 1 else "")
    return CopyIRError(errors.GRID_NOT_POSITIVE.format(grid=f"({text})"))


def parse_parallel(parser: Parser, properties: dict[str, Attribute]) -> None:
    """`parallel [0, 1]`, if there: a grid's parallel dimensions."""
    if parser.parse_optional_keyword("parallel") is not None:
        parallel = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parse_i64(parser)
        )
        properties["parallel"] = i64_array(tuple(parallel))


class GridOp(CopyOp):
    """An op over a grid some of whose dimensions may be parallel: their
    iterations do not depend on each other (a grid's parallel dimension
    semantics), so an interpreter may run them in any order."""

    parallel = opt_prop_def(DenseArrayBase[I64])

    @property
    def parallel_dims(self) -> tuple[int, ...]:
        return () if self.parallel is None else int_values(self.parallel)


def print_parallel(printer: Printer, parallel: DenseArrayBase | None) -> None:
    if parallel is not None:
        printer.print_string(f" parallel [{', '.join(map(str, int_values(parallel)))}]")


def named_block(types: Sequence[Attribute], names: Sequence[str | None]) -> Block:
    """A block whose arguments have these types and, where given, names."""
    block = Block(arg_types=types)
    for arg, name in zip(block.args, names, strict=False):
        set_name(arg, name)
    return block


def print_body(printer: Printer, body: Region) -> None:
    """A body whose arguments the op names before it; an empty one is `{}`."""
    printer.print_string(" ")
    printer.print_region(body, print_entry_block_args=False, print_empty_block=False)


@irdl_op_definition
class ForOp(GridOp):
    """A counted loop, or a grid of them: `copy.for %i in range(0, 8) {...}`,
    `copy.for %i, %j in grid(8, 3) {...}` (row-major, the last index
    fastest, as Pallas walks a grid).

    The body's arguments are the indices. `parallel` lists the dimensions
    whose iterations do not depend on each other (a grid's parallel
    dimension semantics), which the interpreter may run in any order.
    """

    name = "copy.for"

    lower = prop_def(DenseArrayBase[I64])
    upper = prop_def(DenseArrayBase[I64])
    grid = opt_prop_def(UnitAttr)
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    def __init__(
        self,
        lower: Sequence[int],
        upper: Sequence[int],
        names: Sequence[str | None] = (),
        *,
        grid: bool = False,
        parallel: Sequence[int] | None = None,
        body: Region | None = None,
    ):
        """`range(lower, upper)` for one index, or with `grid`, a row-major
        grid of `upper` (every `lower` 0); the body's arguments are the
        indices, named `names`."""
        properties: dict[str, Attribute] = {
            "lower": i64_array(tuple(lower)),
            "upper": i64_array(tuple(upper)),
        }
        if grid:
            properties["grid"] = UnitAttr()
        if parallel is not None:
            properties["parallel"] = i64_array(tuple(parallel))
        if body is None:
            body = Region(named_block([IndexType()] * len(upper), names))
        super().__init__(properties=properties, regions=[body])

    @property
    def indices(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args)

    @property
    def bounds(self) -> list[tuple[int, int]]:
        return list(zip(int_values(self.lower), int_values(self.upper), strict=False))

    def check(self) -> None:
        lower, upper = int_values(self.lower), int_values(self.upper)
        args = self.body.block.args
        if len(lower) != len(upper) or len(args) != len(lower) or not lower:
            raise CopyIRError(
                errors.MALFORMED_LOOP.format(
                    why="its bounds and indices disagree in number"
                )
            )
        if any(not isinstance(a.type, IndexType) for a in args):
            raise CopyIRError(
                errors.MALFORMED_LOOP.format(why="its indices are not index values")
            )
        if self.grid is not None:
            if any(hi < 1 or lo for lo, hi in zip(lower, upper, strict=True)):
                raise grid_not_positive(upper)
        else:
            for arg, lo, hi in zip(args, lower, upper, strict=True):
                if hi <= lo:
                    raise CopyIRError(
                        errors.EMPTY_LOOP.format(
                            name=describe(arg), lower=lo, upper=hi, count=hi - lo
                        )
                    )
        if any(not 0 <= d < len(upper) for d in self.parallel_dims):
            raise CopyIRError(
                errors.MALFORMED_LOOP.format(why="a parallel dimension out of range")
            )

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        names = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, lambda: parser.parse_argument(expect_type=False)
        )
        parser.parse_keyword("in")
        properties: dict[str, Attribute] = {}
        if parser.parse_optional_keyword("grid") is not None:
            upper = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, lambda: parse_i64(parser)
            )
            lower = [0] * len(upper)
            properties["grid"] = UnitAttr()
        else:
            parser.parse_keyword("range")
            parser.parse_punctuation("(")
            lower = [parse_i64(parser)]
            parser.parse_punctuation(",")
            upper = [parse_i64(parser)]
            parser.parse_punctuation(")")
        parse_parallel(parser, properties)
        properties["lower"] = i64_array(tuple(lower))
        properties["upper"] = i64_array(tuple(upper))
        args = [name.resolve(IndexType()) for name in names]
        body = parser.parse_region(args)
        return cls.create(properties=properties, regions=[body])

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.body.block.args, printer.print_operand)
        lower, upper = int_values(self.lower), int_values(self.upper)
        if self.grid is not None:
            printer.print_string(f" in grid({', '.join(map(str, upper))})")
        else:
            printer.print_string(f" in range({lower[0]}, {upper[0]})")
        print_parallel(printer, self.parallel)
        print_body(printer, self.body)


@irdl_op_definition
class IndexOp(CopyOp):
    """An index value, affine in others: `%slot = copy.index
    affine_map<(d0) -> (d0 mod 2)>(%i)`, dimension k being operand k."""

    name = "copy.index"

    args = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure())

    assembly_format = "$map `(` $args `)` attr-dict"

    def __init__(
        self, map: AffineMap, args: Sequence[SSAValue], name: str | None = None
    ):
        super().__init__(
            operands=[args],
            properties={"map": AffineMapAttr(map)},
            result_types=[IndexType()],
        )
        set_name(self.result, name)

    def expression_text(self) -> str:
        """The index expression in the authoring syntax, for messages."""
        from copyir.index import format_expr

        affine_map = self.map.data
        if len(affine_map.results) != 1 or affine_map.num_dims != len(self.args):
            return str(affine_map)
        return format_expr(affine_map.results[0], [describe(a) for a in self.args])

    def result_text(self) -> str:
        return self.expression_text()

    def check(self) -> None:
        affine_map = self.map.data
        if (
            len(affine_map.results) != 1
            or affine_map.num_dims != len(self.args)
            or affine_map.num_symbols
        ):
            raise CopyIRError(
                errors.MALFORMED_INDEX.format(
                    why=f"its map {affine_map} does not take "
                    f"{len(self.args)} indices to one"
                )
            )
        check_evaluable(affine_map.results)


@irdl_op_definition
class WhenOp(CopyOp):
    """Run the body only where a condition holds (`pl.when`): `copy.when
    [affine_set<(d0) : (198 - d0 >= 0)>](%i) { ... }`, an `or` of the
    sets, dimension k being operand k."""

    name = "copy.when"

    args = var_operand_def(IndexType)
    condition = prop_def(ArrayAttr[AffineSetAttr])
    body = region_def("single_block")

    assembly_format = "$condition `(` $args `)` $body attr-dict"

    traits = traits_def(NoTerminator())

    def __init__(
        self,
        condition: Sequence[AffineSet],
        args: Sequence[SSAValue],
        body: Region | None = None,
    ):
        """Run `body` where any of the sets holds of `args`."""
        super().__init__(
            operands=[args],
            properties={"condition": ArrayAttr(AffineSetAttr(s) for s in condition)},
            regions=[body if body is not None else Region(Block())],
        )

    def check(self) -> None:
        for affine_set in self.condition.data:
            if (
                affine_set.data.num_dims != len(self.args)
                or affine_set.data.num_symbols
            ):
                raise CopyIRError(
                    errors.MALFORMED_INDEX.format(
                        why=f"its condition {affine_set.data} does not take "
                        f"{len(self.args)} indices"
                    )
                )
            constraints = affine_set.data.constraints
            check_evaluable([e for c in constraints for e in (c.lhs, c.rhs)])
