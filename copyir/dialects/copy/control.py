"""Control flow: counted loops and grids (`copy.for`) with their dimension
semantics, index values affine in loop indices, or their min or max
(`copy.index`), and
conditions on them (`copy.when`)."""

from __future__ import annotations

import functools
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
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Block, Region, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.ir.affine import AffineMap, AffineSet
from xdsl.irdl import (
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator, Pure
from xdsl.utils.str_enum import StrEnum

from copyir import errors
from copyir.attributes import i64_array, int_values
from copyir.errors import CopyIRError

from .base import CopyOp, check_evaluable, describe, parse_word, set_name
from .types import parse_i64


def grid_not_positive(grid: Sequence[int]) -> CopyIRError:
    """GRID_NOT_POSITIVE, the grid spelled as a Python tuple."""
    text = ", ".join(map(str, grid)) + ("," if len(grid) == 1 else "")
    return CopyIRError(errors.GRID_NOT_POSITIVE.format(grid=f"({text})"))


class DimensionSemantics(StrEnum):
    """What a grid dimension claims, as Pallas' `dimension_semantics` says:
    the iterations of a `parallel` one do not depend on each other, so an
    interpreter may run them in any order (and a TPU split them across
    cores); an `arbitrary` one claims nothing."""

    PARALLEL = "parallel"
    ARBITRARY = "arbitrary"


PARALLEL, ARBITRARY = DimensionSemantics
SEMANTICS = tuple(DimensionSemantics)


@irdl_attr_definition
class DimensionSemanticsAttr(
    EnumAttribute[DimensionSemantics], SpacedOpaqueSyntaxAttribute
):
    """One grid dimension's semantics: `#copy<dim parallel>`."""

    name = "copy.dim"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> DimensionSemantics:
        return parse_semantics(parser)


def parse_semantics(parser: AttrParser) -> DimensionSemantics:
    """`parallel` or `arbitrary`; another word is DIMENSION_SEMANTICS."""
    return parse_word(
        parser, DimensionSemantics, "a dimension's semantics", unknown_semantics
    )


def unknown_semantics(word: str) -> str:
    return errors.DIMENSION_SEMANTICS.format(name=word)


def check_semantics(word: str) -> DimensionSemantics:
    """The semantics a word names, or DIMENSION_SEMANTICS quoting it."""
    if word not in SEMANTICS:
        raise CopyIRError(unknown_semantics(word))
    return DimensionSemantics(word)


@functools.lru_cache(maxsize=256)
def _semantics_array(
    semantics: tuple[DimensionSemantics, ...],
) -> ArrayAttr[DimensionSemanticsAttr]:
    return ArrayAttr(DimensionSemanticsAttr(s) for s in semantics)


def semantics_attr(
    semantics: Sequence[DimensionSemantics | str],
) -> ArrayAttr[DimensionSemanticsAttr]:
    """A grid's `dimension_semantics` property, one entry per dimension
    (shared: grids repeat a few)."""
    return _semantics_array(tuple(check_semantics(s) for s in semantics))


def parallel_semantics(
    rank: int, parallel: Sequence[int]
) -> tuple[DimensionSemantics, ...]:
    """The semantics of a grid of `rank` whose `parallel` dimensions are
    parallel, the others arbitrary (`.cpy`'s `parallel=(0,)`)."""
    return tuple(PARALLEL if k in parallel else ARBITRARY for k in range(rank))


def parse_dimension_semantics(parser: Parser, properties: dict[str, Attribute]) -> None:
    """`dimension_semantics [parallel, arbitrary]`, if there."""
    if parser.parse_optional_keyword("dimension_semantics") is not None:
        semantics = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parse_semantics(parser)
        )
        properties["dimension_semantics"] = semantics_attr(semantics)


class GridOp(CopyOp):
    """An op over a grid with a semantics per dimension (Pallas'
    `dimension_semantics`): the iterations of a parallel dimension do not
    depend on each other, so an interpreter may run them in any order.
    Without the property every dimension is arbitrary."""

    dimension_semantics = opt_prop_def(ArrayAttr[DimensionSemanticsAttr])

    @property
    def parallel_dims(self) -> tuple[int, ...]:
        """The parallel dimensions, in order: what passes and backends use."""
        if self.dimension_semantics is None:
            return ()
        semantics = self.dimension_semantics.data
        return tuple(k for k, s in enumerate(semantics) if s.data == PARALLEL)

    @staticmethod
    def semantics_properties(
        semantics: Sequence[DimensionSemantics | str] | None,
    ) -> dict[str, Attribute]:
        """The builders' `dimension_semantics` property, when given."""
        if semantics is None:
            return {}
        return {"dimension_semantics": semantics_attr(semantics)}

    def print_semantics(self, printer: Printer) -> None:
        """` dimension_semantics [parallel, arbitrary]`, when given."""
        if self.dimension_semantics is not None:
            words = ", ".join(s.data for s in self.dimension_semantics.data)
            printer.print_string(f" dimension_semantics [{words}]")


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

    The body's arguments are the indices. `dimension_semantics
    [parallel, arbitrary]`, one per index, says which dimensions' iterations
    do not depend on each other (`GridOp`).
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
        dimension_semantics: Sequence[DimensionSemantics | str] | None = None,
        body: Region | None = None,
    ):
        """`range(lower, upper)` for one index, or with `grid`, a row-major
        grid of `upper` (every `lower` 0); the body's arguments are the
        indices, named `names`; `dimension_semantics`, one per index,
        `parallel` or `arbitrary`."""
        properties: dict[str, Attribute] = {
            "lower": i64_array(tuple(lower)),
            "upper": i64_array(tuple(upper)),
            **self.semantics_properties(dimension_semantics),
        }
        if grid:
            properties["grid"] = UnitAttr()
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
        semantics = self.dimension_semantics
        if semantics is not None and len(semantics) != len(upper):
            raise CopyIRError(
                errors.MALFORMED_LOOP.format(
                    why="its dimension semantics and indices disagree in number"
                )
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
        parse_dimension_semantics(parser, properties)
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
        self.print_semantics(printer)
        print_body(printer, self.body)


class Combine(StrEnum):
    """How a `copy.index` of several results combines them: their least or
    their greatest (MLIR's `affine.min` and `affine.max`), as kernels clamp
    an index (`min(128 * i, 872)`)."""

    MIN = "min"
    MAX = "max"


@irdl_attr_definition
class CombineAttr(EnumAttribute[Combine], SpacedOpaqueSyntaxAttribute):
    """`#copy<combine min>`: the `combine` property of a `copy.index`."""

    name = "copy.combine"


@irdl_op_definition
class IndexOp(CopyOp):
    """An index value, affine in others: `%slot = copy.index
    affine_map<(d0) -> (d0 mod 2)>(%i)`, dimension k being operand k; or
    the least or greatest of the map's results, `%s = copy.index min
    affine_map<(d0) -> (d0 * 128, 872)>(%i)` (not affine: see
    `copyir.index.Pieces` for how the checks and the lowering stay exact)."""

    name = "copy.index"

    args = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)
    combine = opt_prop_def(CombineAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure())

    def __init__(
        self,
        map: AffineMap,
        args: Sequence[SSAValue],
        name: str | None = None,
        combine: Combine | str | None = None,
    ):
        """The map's one result of `args`; with `combine` (`min` or
        `max`), the least or greatest of its results."""
        properties: dict[str, Attribute] = {"map": AffineMapAttr(map)}
        if combine is not None:
            properties["combine"] = CombineAttr(Combine(combine))
        super().__init__(
            operands=[args], properties=properties, result_types=[IndexType()]
        )
        set_name(self.result, name)

    @property
    def combine_kind(self) -> Combine | None:
        return None if self.combine is None else self.combine.data

    @classmethod
    def parse(cls, parser: Parser) -> IndexOp:
        properties: dict[str, Attribute] = {}
        for kind in Combine:
            if parser.parse_optional_keyword(kind.value) is not None:
                properties["combine"] = CombineAttr(kind)
                break
        properties["map"] = parser.parse_attribute()
        args = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        attributes = parser.parse_optional_attr_dict()
        operands = [parser.resolve_operand(a, IndexType()) for a in args]
        return cls.create(
            operands=operands,
            properties=properties,
            attributes=attributes,
            result_types=[IndexType()],
        )

    def print(self, printer: Printer) -> None:
        if self.combine is not None:
            printer.print_string(f" {self.combine.data.value}")
        printer.print_string(" ")
        printer.print_attribute(self.map)
        printer.print_string("(")
        printer.print_list(self.args, printer.print_operand)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)

    def expression_text(self) -> str:
        """The index expression in the authoring syntax, for messages."""
        from copyir.index import format_expr

        affine_map = self.map.data
        if not self.well_formed():
            return str(affine_map)
        names = [describe(a) for a in self.args]
        texts = [format_expr(r, names) for r in affine_map.results]
        if self.combine is None:
            return texts[0]
        return f"{self.combine.data.value}({', '.join(texts)})"

    def result_text(self) -> str:
        return self.expression_text()

    def well_formed(self) -> bool:
        """One result, or with `combine` two or more, of as many dimensions
        as operands, and no symbols."""
        affine_map = self.map.data
        results = len(affine_map.results)
        return (
            (results == 1 if self.combine is None else results >= 2)
            and affine_map.num_dims == len(self.args)
            and not affine_map.num_symbols
        )

    def check(self) -> None:
        affine_map = self.map.data
        if not self.well_formed():
            count = "one" if self.combine is None else "two or more"
            raise CopyIRError(
                errors.MALFORMED_INDEX.format(
                    why=f"its map {affine_map} does not take "
                    f"{len(self.args)} indices to {count}"
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
