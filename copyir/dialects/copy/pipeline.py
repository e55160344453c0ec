"""`copy.pipeline`: Pallas' `emit_pipeline`, blocks of HBM refs streamed
through VMEM windows over a grid, each operand with its `PipelineSpecAttr`."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    IntAttr,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    ParametrizedAttribute,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator
from xdsl.utils.str_enum import StrEnum

from copyir import errors
from copyir.attributes import i64_array, int_values
from copyir.errors import CopyIRError

from .base import check_evaluable, describe, describe_type, expect_ref
from .control import (
    DimensionSemantics,
    GridOp,
    grid_not_positive,
    named_block,
    parse_dimension_semantics,
    print_body,
)
from .types import (
    SQUEEZED,
    BlockDimAttr,
    BufferedRefType,
    RefType,
    parse_i64,
    ref_type,
)
from .windows import BufferedRefOp


class Direction(StrEnum):
    """Whether a pipeline reads an operand's blocks, writes them, or both
    (JAX 0.12's `BufferedRef.input_output`)."""

    IN = "in"
    OUT = "out"
    INOUT = "inout"


IN, OUT, INOUT = Direction.IN, Direction.OUT, Direction.INOUT


@irdl_attr_definition
class DirectionAttr(EnumAttribute[Direction], SpacedOpaqueSyntaxAttribute):
    name = "copy.direction"


@irdl_attr_definition
class PipelineSpecAttr(ParametrizedAttribute):
    """How a pipeline streams one operand, Pallas' `BlockSpec` with its
    direction and buffer count: `#copy.pipeline_spec<in block [128, 128]
    index affine_map<(d0, d1) -> (d0, d1)> buffers 3>`. An `inout` operand
    has an input and an output count, `buffers [2, 1]`, and `in + out - 1`
    slots, as JAX 0.12's input_output BufferedRef."""

    name = "copy.pipeline_spec"

    direction: DirectionAttr
    block: ArrayAttr[BlockDimAttr]
    index_map: AffineMapAttr
    buffers: IntAttr
    """The input count of an `inout`, else the operand's count."""
    out_buffers: IntAttr
    """The output count of an `inout`; 0 for the others."""
    lookahead: IntAttr
    """1 for an input with `pl.Buffered(n, use_lookahead=True)`: it fetches
    the next blocks that differ, not the next steps' blocks."""

    def __init__(
        self,
        direction: Direction,
        block: Sequence[BlockDimAttr],
        index_map: AffineMap | AffineMapAttr,
        buffers: int = 2,
        out_buffers: int = 0,
        lookahead: bool = False,
    ):
        if isinstance(index_map, AffineMap):
            index_map = AffineMapAttr(index_map)
        super().__init__(
            DirectionAttr(Direction(direction)),
            ArrayAttr(block),
            index_map,
            IntAttr(buffers),
            IntAttr(out_buffers),
            IntAttr(int(lookahead)),
        )

    @property
    def looks_ahead(self) -> bool:
        return bool(self.lookahead.data)

    @property
    def output(self) -> bool:
        """Whether the pipeline writes the operand's blocks back."""
        return self.direction.data != IN

    @property
    def input(self) -> bool:
        """Whether the pipeline fetches the operand's blocks."""
        return self.direction.data != OUT

    @property
    def counts(self) -> tuple[int, int]:
        """(input, output) buffer counts; 0 for a direction it lacks."""
        count = self.buffers.data
        if self.direction.data == INOUT:
            return count, self.out_buffers.data
        return (count, 0) if self.direction.data == IN else (0, count)

    @property
    def slots(self) -> int:
        """Its window's slots: an `inout` shares one between its last
        fetch and its first write-back (Pallas' `_total_buffer_count`)."""
        fetched, written = self.counts
        return fetched + written - (self.direction.data == INOUT)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            direction = parse_direction(parser)
            spec = parse_spec_rest(parser, direction)
        return list(spec.parameters)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.direction.data)
            self.print_rest(printer)

    def print_rest(self, printer: Printer) -> None:
        """` block [...] index <map> buffers n`: all but the direction."""
        printer.print_string(" block [")
        printer.print_list(self.block.data, lambda b: b.print_block_dim(printer))
        printer.print_string("] index ")
        printer.print_attribute(self.index_map)
        if self.direction.data == INOUT:
            printer.print_string(f" buffers [{', '.join(map(str, self.counts))}]")
        else:
            printer.print_string(f" buffers {self.buffers.data}")
        if self.looks_ahead:
            printer.print_string(" lookahead")


def parse_direction(parser: AttrParser) -> Direction:
    if parser.parse_optional_keyword("out") is not None:
        return OUT
    if parser.parse_optional_keyword("inout") is not None:
        return INOUT
    parser.parse_keyword("in")
    return IN


def parse_spec_rest(
    parser: AttrParser, direction: Direction, shape: Sequence[int] = ()
) -> PipelineSpecAttr:
    """`block [...] index <map> buffers n` after the direction (and, in the
    op's form, the operand); a block size below 1 is a parse error, as it
    gives no window type."""
    parser.parse_keyword("block")
    start = parser.pos
    block = parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: BlockDimAttr.parse_block_dim(parser)
    )
    for dim, (b, extent) in enumerate(zip(block, shape, strict=False)):
        if b.kind.data != SQUEEZED and b.size.data < 1:
            message = errors.BLOCK_SIZE.format(size=b.size.data, dim=dim, extent=extent)
            parser.raise_error(message, start, parser.pos)
    parser.parse_keyword("index")
    index_map = parser.parse_attribute()
    parser.parse_keyword("buffers")
    if direction == INOUT:
        start = parser.pos
        counts = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parse_i64(parser)
        )
        if len(counts) != 2:
            parser.raise_error(errors.INOUT_BUFFERS, start, parser.pos)
        buffers, out_buffers = counts
    else:
        buffers, out_buffers = parse_i64(parser), 0
    lookahead = parser.parse_optional_keyword("lookahead") is not None
    return PipelineSpecAttr.new(
        (
            DirectionAttr(direction),
            ArrayAttr(block),
            index_map,
            IntAttr(buffers),
            IntAttr(out_buffers),
            IntAttr(int(lookahead)),
        )
    )


_INDEX_NAMES = ("i", "j", "k", "l", "m", "n")


def is_viewed(ref: SSAValue) -> bool:
    """A pipeline operand already in VMEM, the windows' space: Pallas'
    `BufferedRef.create` allocates it no buffer, so the pipeline views it at
    each block (`compute_slice`, a whole block) and copies nothing."""
    return isinstance(ref.type, RefType) and ref.type.space_name == "vmem"


def default_index_name(dim: int) -> str:
    """The name of an unnamed grid index `dim` of a pipeline."""
    return _INDEX_NAMES[dim] if dim < len(_INDEX_NAMES) else f"i{dim}"


@irdl_op_definition
class PipelineOp(GridOp):
    """`pltpu.emit_pipeline`: stream blocks of HBM refs through VMEM windows
    over a grid, running the body once per grid point on the current
    windows.

    `copy.pipeline grid(8, 3) in %x : !copy.ref<...> block [128, 128] index
    affine_map<(d0, d1) -> (d0, d1)> buffers 3, out %y : ... (%xw, %yw, %i,
    %j) { ... }`: each operand has its `PipelineSpecAttr` (`in`, `out` or
    `inout`, a block shape, an index map and its buffer counts); the body's
    arguments are the operands' windows (VMEM refs of the block shape,
    squeezed dimensions dropped), then the grid indices. Operands may be in
    any memory space: an inner pipeline streams an outer one's windows.

    Two flavours: `emit_pipeline`'s (the default) walks the whole grid as
    one schedule whatever `dimension_semantics [parallel, arbitrary]` says,
    unless `cores 2` splits it over cores as Pallas' `_partition_grid`
    does; `kernel_grid` is a `pallas_call`'s grid and BlockSpecs, whose
    parallel dimensions (a prefix) each run their own schedule.
    `no_pipelining` copies every block in and out synchronously around each
    step. `expand-pipelines` lowers it to loops of asynchronous window
    copies, with Pallas' schedule (`copyir.pipelines`).
    """

    name = "copy.pipeline"

    refs = var_operand_def(RefType)
    grid = prop_def(DenseArrayBase[I64])
    ref_specs = prop_def(ArrayAttr[PipelineSpecAttr])
    no_pipelining = opt_prop_def(UnitAttr)
    kernel_grid = opt_prop_def(UnitAttr)
    cores = opt_prop_def(IntAttr)
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    def __init__(
        self,
        grid: Sequence[int],
        refs: Sequence[SSAValue],
        specs: Sequence[PipelineSpecAttr],
        names: Sequence[str | None] = (),
        *,
        dimension_semantics: Sequence[DimensionSemantics | str] | None = None,
        no_pipelining: bool = False,
        kernel_grid: bool = False,
        cores: int | None = None,
        body: Region | None = None,
    ):
        """Stream `refs` as `specs` say over `grid`, whose dimensions have
        `dimension_semantics` (`parallel` or `arbitrary`, one each), as a
        kernel's grid or as `emit_pipeline` (over `cores`, if given); the
        body's arguments (windows, then grid indices) are named `names`."""
        properties: dict[str, Attribute] = {
            "grid": i64_array(tuple(grid)),
            "ref_specs": ArrayAttr(specs),
            **self.semantics_properties(dimension_semantics),
        }
        if no_pipelining:
            properties["no_pipelining"] = UnitAttr()
        if kernel_grid:
            properties["kernel_grid"] = UnitAttr()
        if cores is not None:
            properties["cores"] = IntAttr(cores)
        if body is None:
            windows = self.window_types(
                [r.type for r in refs], [s.block for s in specs]
            )
            types = [*windows, *[IndexType()] * len(grid)]
            body = Region(named_block(types, names))
        super().__init__(operands=[refs], properties=properties, regions=[body])

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return int_values(self.grid)

    @property
    def core_count(self) -> int | None:
        return None if self.cores is None else self.cores.data

    def semantics_or_arbitrary(self) -> tuple[DimensionSemantics, ...]:
        """Each grid dimension's semantics, `arbitrary` where none is given
        (as Pallas assumes)."""
        if self.dimension_semantics is None:
            return (DimensionSemantics.ARBITRARY,) * len(self.grid_shape)
        return tuple(DimensionSemantics(s.data) for s in self.dimension_semantics.data)

    @property
    def windows(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args[: len(self.refs)])

    @property
    def indices(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args[len(self.refs) :])

    def index_name(self, dim: int) -> str:
        """Grid index `dim`'s name: the body's, or when the body names none
        (`(xw, yw) { ... }`), i, j, k, l, m, n, then i6, i7, ..., as the
        authoring syntax writes the index maps' parameters then and as
        messages name the iteration."""
        hint = self.indices[dim].name_hint if dim < len(self.indices) else None
        return hint or default_index_name(dim)

    def specs(self) -> list[tuple[SSAValue, bool, BufferedRefType, AffineMapAttr]]:
        """Per operand: the ref, whether it is an output, its BufferedRef
        type (block shape, buffers, window) and its index map."""
        found = []
        for ref, spec in zip(self.refs, self.ref_specs.data, strict=False):
            type = ref.type
            shape = type.get_shape() if isinstance(type, RefType) else ()
            element = type.element_type if isinstance(type, RefType) else i64
            block, buffers = spec.block.data, spec.slots
            bref = BufferedRefType(shape, element, block, buffers, "vmem")
            found.append((ref, spec.output, bref, spec.index_map))
        return found

    @staticmethod
    def window_types(refs_types: Sequence[Attribute], blocks) -> list[Attribute]:
        """The body's window types, from the operands' types and blocks."""
        types = []
        for type, block in zip(refs_types, blocks, strict=False):
            kept = [b.window_extent for b in block.data if b.kind.data != SQUEEZED]
            element = type.element_type if isinstance(type, RefType) else i64
            types.append(ref_type(tuple(kept), element, "vmem"))
        return types

    def check(self) -> None:
        grid = self.grid_shape
        if any(extent < 1 for extent in grid) or not grid:
            raise grid_not_positive(grid)
        if len(self.refs) != len(self.ref_specs.data):
            raise CopyIRError(
                errors.MALFORMED_PIPELINE.format(why="its specs disagree in number")
            )
        semantics = self.dimension_semantics
        if semantics is not None and len(semantics) != len(grid):
            raise CopyIRError(
                errors.DIMENSION_SEMANTICS_COUNT.format(
                    count=len(semantics), rank=len(grid)
                )
            )
        self.check_flavour()
        args = self.body.block.args
        if len(args) != len(self.refs) + len(grid):
            raise CopyIRError(
                errors.MALFORMED_PIPELINE.format(
                    why="its body takes a window per operand and an index per "
                    "grid dimension"
                )
            )
        for number, (ref, output, bref, index_map) in enumerate(self.specs()):
            type = expect_ref("pipeline", "operand", ref)
            spec = self.ref_specs.data[number]
            if spec.looks_ahead and spec.output:
                raise CopyIRError(errors.OUTPUT_LOOKAHEAD)
            if spec.looks_ahead and spec.buffers.data == 1:  # 0: BAD_BUFFERS
                raise CopyIRError(errors.LOOKAHEAD_ONE_BUFFER)
            if spec.direction.data == INOUT:
                if min(spec.counts) < 1:
                    raise CopyIRError(
                        errors.BAD_BUFFERS.format(buffers=min(spec.counts))
                    )
                if self.kernel_grid is not None:
                    raise CopyIRError(errors.INOUT_ON_KERNEL_GRID)
            padded = self.kernel_grid is not None or is_viewed(ref)
            BufferedRefOp.check_type(bref, describe(ref), padded)
            if output and bref.buffers.data > 2 and self.kernel_grid is not None:
                raise CopyIRError(errors.OUTPUT_BUFFERS)
            affine_map = index_map.data
            if (
                affine_map.num_dims != len(grid)
                or affine_map.num_symbols
                or len(affine_map.results) != len(type.get_shape())
            ):
                raise CopyIRError(
                    errors.INDEX_MAP_RANK.format(
                        name=describe(ref),
                        map=affine_map,
                        grid=len(grid),
                        rank=len(type.get_shape()),
                    )
                )
            check_evaluable(affine_map.results)
            window = self.windows[number]
            slot = bref.window_type
            if window.type != ref_type(slot.get_shape()[1:], type.element_type, "vmem"):
                raise CopyIRError(
                    errors.MALFORMED_PIPELINE.format(
                        why=f"the window of {describe(ref)} should be "
                        f"{describe_type(bref.window_type)} without its slot"
                    )
                )
        if any(not isinstance(i.type, IndexType) for i in self.indices):
            raise CopyIRError(
                errors.MALFORMED_PIPELINE.format(
                    why="its grid indices are not index values"
                )
            )

    def check_flavour(self) -> None:
        """The kernel grid's parallel prefix; cores for emit_pipeline only."""
        if self.kernel_grid is not None:
            if self.cores is not None:
                raise CopyIRError(errors.CORES_ON_KERNEL_GRID)
            parallel = self.parallel_dims
            if parallel != tuple(range(len(parallel))):
                raise CopyIRError(errors.PARALLEL_PREFIX)
        elif self.cores is not None and self.cores.data < 1:
            raise CopyIRError(errors.CORES_NOT_POSITIVE.format(cores=self.cores.data))

    @classmethod
    def parse(cls, parser: Parser) -> PipelineOp:
        parser.parse_keyword("grid")
        grid = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parse_i64(parser)
        )
        properties: dict[str, Attribute] = {"grid": i64_array(tuple(grid))}
        if parser.parse_optional_keyword("kernel_grid") is not None:
            properties["kernel_grid"] = UnitAttr()
        parse_dimension_semantics(parser, properties)
        if parser.parse_optional_keyword("cores") is not None:
            properties["cores"] = IntAttr(parse_i64(parser))
        if parser.parse_optional_keyword("no_pipelining") is not None:
            properties["no_pipelining"] = UnitAttr()

        def operand() -> tuple[SSAValue, PipelineSpecAttr]:
            direction = parse_direction(parser)
            ref = parser.parse_unresolved_operand()
            parser.parse_punctuation(":")
            type = parser.parse_type()
            shape = type.get_shape() if isinstance(type, RefType) else ()
            spec = parse_spec_rest(parser, direction, shape)
            return parser.resolve_operand(ref, type), spec

        operands = parser.parse_comma_separated_list(parser.Delimiter.NONE, operand)
        names = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        refs = [ref for ref, _ in operands]
        specs = [spec for _, spec in operands]
        types = cls.window_types([r.type for r in refs], [s.block for s in specs])
        types += [IndexType()] * (len(names) - len(types))
        args = [name.resolve(t) for name, t in zip(names, types, strict=False)]
        body = parser.parse_region(args)
        properties["ref_specs"] = ArrayAttr(specs)
        return cls.create(operands=refs, properties=properties, regions=[body])

    def print(self, printer: Printer) -> None:
        grid = ", ".join(map(str, self.grid_shape))
        printer.print_string(f" grid({grid})")
        if self.kernel_grid is not None:
            printer.print_string(" kernel_grid")
        self.print_semantics(printer)
        if self.cores is not None:
            printer.print_string(f" cores {self.cores.data}")
        if self.no_pipelining is not None:
            printer.print_string(" no_pipelining")
        for k, (ref, spec) in enumerate(
            zip(self.refs, self.ref_specs.data, strict=False)
        ):
            printer.print_string("," if k else "")
            printer.print_string(f" {spec.direction.data} ")
            printer.print_operand(ref)
            printer.print_string(" : ")
            printer.print_attribute(ref.type)
            spec.print_rest(printer)
        printer.print_string(" (")
        printer.print_list(self.body.block.args, printer.print_operand)
        printer.print_string(")")
        print_body(printer, self.body)
