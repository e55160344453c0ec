"""`copy.pipeline`: Pallas' `emit_pipeline`, blocks of HBM refs streamed
through VMEM windows over a grid."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator

from copyir import errors
from copyir.attributes import i64_array, int_values
from copyir.errors import CopyIRError

from .base import check_evaluable, describe, describe_type, expect_ref
from .control import (
    GridOp,
    grid_not_positive,
    parse_parallel,
    print_body,
    print_parallel,
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

_INDEX_NAMES = ("i", "j", "k", "l", "m", "n")
IN, OUT = 0, 1


_INDEX_NAMES = ("i", "j", "k", "l", "m", "n")


def default_index_name(dim: int) -> str:
    """The name of an unnamed grid index `dim` of a pipeline."""
    return _INDEX_NAMES[dim] if dim < len(_INDEX_NAMES) else f"i{dim}"


@irdl_op_definition
class PipelineOp(GridOp):
    """`pltpu.emit_pipeline`: stream blocks of HBM refs through VMEM windows
    over a grid, running the body once per grid point on the current
    windows.

    `copy.pipeline grid(8, 3) in %x block [128, 128] index affine_map<(d0,
    d1) -> (d0, d1)> buffers 3, out %y block [...] index ... buffers 2
    (%xw, %yw, %i, %j) { ... }`: each operand is an input or an output, with
    a block shape (as a BufferedRef's), an index map from the grid indices
    to block indices and a buffer count; the body's arguments are the
    operands' windows (VMEM refs of the block shape, squeezed dimensions
    dropped), then the grid indices. `parallel [0]` names the grid's
    parallel dimensions (a prefix); `no_pipelining` copies every block in
    and out synchronously around each step. `expand-pipelines` lowers it to
    loops of asynchronous window copies, with Pallas' schedule
    (`copyir.pipelines`).
    """

    name = "copy.pipeline"

    refs = var_operand_def(RefType)
    grid = prop_def(DenseArrayBase[I64])
    directions = prop_def(DenseArrayBase[I64])
    blocks = prop_def(ArrayAttr[ArrayAttr[BlockDimAttr]])
    index_maps = prop_def(ArrayAttr[AffineMapAttr])
    buffers = prop_def(DenseArrayBase[I64])
    no_pipelining = opt_prop_def(UnitAttr)
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return int_values(self.grid)

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
        for ref, direction, block, index_map, buffers in self._rows():
            type = ref.type
            shape = type.get_shape() if isinstance(type, RefType) else ()
            element = type.element_type if isinstance(type, RefType) else i64
            bref = BufferedRefType(shape, element, block.data, buffers, "vmem")
            found.append((ref, direction == OUT, bref, index_map))
        return found

    def _rows(self) -> zip:
        """Per operand: (ref, direction, block, index map, buffers), from the
        five arrays that hold them."""
        return zip(
            self.refs,
            int_values(self.directions),
            self.blocks.data,
            self.index_maps.data,
            int_values(self.buffers),
            strict=False,
        )

    @staticmethod
    def window_types(refs_types: Sequence[Attribute], blocks) -> list[Attribute]:
        """The body's window types, from the operands' types and blocks."""
        types = []
        for type, block in zip(refs_types, blocks, strict=False):
            kept = [b.size.data for b in block.data if b.kind.data != SQUEEZED]
            element = type.element_type if isinstance(type, RefType) else i64
            types.append(ref_type(tuple(kept), element, "vmem"))
        return types

    def check(self) -> None:
        grid = self.grid_shape
        if any(extent < 1 for extent in grid) or not grid:
            raise grid_not_positive(grid)
        counts = {
            len(self.refs),
            len(int_values(self.directions)),
            len(self.blocks.data),
            len(self.index_maps.data),
            len(int_values(self.buffers)),
        }
        if len(counts) != 1:
            raise CopyIRError(
                errors.MALFORMED_PIPELINE.format(why="its specs disagree in number")
            )
        parallel = self.parallel_dims
        if list(parallel) != list(range(len(parallel))) or len(parallel) > len(grid):
            raise CopyIRError(errors.PARALLEL_PREFIX)
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
            if type.space_name != "hbm":
                raise CopyIRError(
                    errors.PIPELINE_OPERAND_SPACE.format(
                        name=describe(ref), type=type.describe()
                    )
                )
            BufferedRefOp.check_type(bref, describe(ref))
            if output and bref.buffers.data > 2:
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

    @classmethod
    def parse(cls, parser: Parser) -> PipelineOp:
        parser.parse_keyword("grid")
        grid = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parse_i64(parser)
        )
        properties: dict[str, Attribute] = {"grid": i64_array(tuple(grid))}
        parse_parallel(parser, properties)
        if parser.parse_optional_keyword("no_pipelining") is not None:
            properties["no_pipelining"] = UnitAttr()

        def spec():
            direction = OUT if parser.parse_optional_keyword("out") else IN
            if direction == IN:
                parser.parse_keyword("in")
            ref = parser.parse_unresolved_operand()
            parser.parse_punctuation(":")
            type = parser.parse_type()
            parser.parse_keyword("block")
            start = parser.pos
            block = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: BlockDimAttr.parse_block_dim(parser)
            )
            shape = type.get_shape() if isinstance(type, RefType) else ()
            for dim, (b, extent) in enumerate(zip(block, shape, strict=False)):
                if b.kind.data != SQUEEZED and b.size.data < 1:  # no window type
                    message = errors.BLOCK_SIZE.format(
                        size=b.size.data, dim=dim, extent=extent
                    )
                    parser.raise_error(message, start, parser.pos)
            parser.parse_keyword("index")
            index_map = parser.parse_attribute()
            parser.parse_keyword("buffers")
            buffers = parse_i64(parser)
            return (
                direction,
                parser.resolve_operand(ref, type),
                block,
                index_map,
                buffers,
            )

        specs = parser.parse_comma_separated_list(parser.Delimiter.NONE, spec)
        names = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        blocks = [ArrayAttr(s[2]) for s in specs]
        types = cls.window_types([s[1].type for s in specs], blocks)
        types += [IndexType()] * (len(names) - len(types))
        args = [name.resolve(t) for name, t in zip(names, types, strict=False)]
        body = parser.parse_region(args)
        properties |= {
            "directions": i64_array(tuple(s[0] for s in specs)),
            "blocks": ArrayAttr(blocks),
            "index_maps": ArrayAttr(s[3] for s in specs),
            "buffers": i64_array(tuple(s[4] for s in specs)),
        }
        return cls.create(
            operands=[s[1] for s in specs], properties=properties, regions=[body]
        )

    def print(self, printer: Printer) -> None:
        grid = ", ".join(map(str, self.grid_shape))
        printer.print_string(f" grid({grid})")
        print_parallel(printer, self.parallel)
        if self.no_pipelining is not None:
            printer.print_string(" no_pipelining")
        for k, (ref, direction, block, index_map, buffers) in enumerate(self._rows()):
            printer.print_string("," if k else "")
            printer.print_string(" out " if direction == OUT else " in ")
            printer.print_operand(ref)
            printer.print_string(" : ")
            printer.print_attribute(ref.type)
            printer.print_string(" block [")
            printer.print_list(block.data, lambda b: b.print_block_dim(printer))
            printer.print_string("] index ")
            printer.print_attribute(index_map)
            printer.print_string(f" buffers {buffers}")
        printer.print_string(" (")
        printer.print_list(self.body.block.args, printer.print_operand)
        printer.print_string(")")
        print_body(printer, self.body)
