"""`.cpy` statements with a body: `for`, `when`, `pipeline` and `scope`,
and a pipeline's header (its options, window specs and index maps)."""

from __future__ import annotations

from lark import Token, Tree
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    IntAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.ir.affine import AffineMap

from copyir import errors
from copyir.attributes import i64_array
from copyir.cpy.expressions import (
    COMBINES,
    Affine,
    call_args,
    checked,
    condition,
    is_bare_name,
    is_call,
    static_integer,
    strip_parens,
)
from copyir.cpy.operands import int_literal
from copyir.cpy.options import OptionReader
from copyir.cpy.scope import INDEX, ScopedBuilder, children
from copyir.dialects.copy import (
    BOUNDED,
    IN,
    INOUT,
    OUT,
    SEMANTICS,
    SQUEEZED,
    BlockDimAttr,
    BufferedRefOp,
    BufferedRefType,
    ForOp,
    PipelineOp,
    PipelineSpecAttr,
    RefType,
    ScopeOp,
    WhenOp,
    describe,
    expect_ref,
    parallel_semantics,
    semantics_attr,
)
from copyir.errors import CopyIRError, Note
from copyir.hints import did_you_mean


class _MapScope:
    """What an index map's expressions see: its parameters, as index values
    of their own, and nothing else (the builder lends its messages)."""

    def __init__(self, builder: ScopedBuilder, names: list[Token]):
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


class BodyBuilder(OptionReader):
    """Loops, conditions, pipelines and scopes: each opens a scope of names
    for its body."""

    def for_stmt(self, tree: Tree) -> None:
        """`for i in range(8)`, `for i in range(a, b)`, `for i, j in grid(8,
        3)`: one copy.for whose body's arguments are the indices."""
        for_token, names_tree, range_tree, *rest = children(tree)
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
            if any(d not in range(len(upper)) for d in parallel):
                raise self.error(
                    for_token,
                    errors.MALFORMED_LOOP.format(
                        why="a parallel dimension out of range"
                    ),
                )
            semantics = parallel_semantics(len(upper), parallel)
            properties["dimension_semantics"] = semantics_attr(semantics)
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
        function, *args = children(tree)
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
        token, *items = children(tree)
        names_tree, _, body = items[-3:]
        specs = [i for i in items[:-3] if i.data in _SPECS]
        options = [i for i in items[:-3] if i.data not in _SPECS]
        looks_ahead = any(
            str(children(item)[0]) == "lookahead"
            for spec in specs
            for item in children(spec)
            if isinstance(item, Tree)
        )
        properties = self.pipeline_options(token, options, looks_ahead)
        rank = len(properties["grid"].get_values())
        refs, parts = [], []
        for spec in specs:
            ref, *part = self.pipeline_spec(spec, rank)
            refs.append(ref)
            parts.append(part)
        specs = [PipelineSpecAttr(*part) for part in parts]
        properties["ref_specs"] = ArrayAttr(specs)
        names = [n for n in names_tree.children if n is not None]
        if len(names) not in (len(refs), len(refs) + rank):
            raise self.error(
                names[0] if names else token,
                errors.PIPELINE_BODY_NAMES.format(
                    count=len(names), windows=len(refs), rank=rank
                ),
            )
        types = [ref.type for ref in refs]
        windows = PipelineOp.window_types(types, [s.block for s in specs])
        block = Block(arg_types=[*windows, *[INDEX] * rank])
        self.emit(PipelineOp, refs, (), properties, [Region(block)])
        outer = self.open_scope("pipeline", token, block)
        for arg, name in zip(block.args, names, strict=False):
            self.define(name, arg)
        for name in names[len(refs) :]:
            self.loop_lines[str(name)] = (token.line, "pipeline")
        self.statements(body)
        self.close_scope(outer)

    def pipeline_options(
        self, token: Token, options: list[Tree], looks_ahead: bool = False
    ) -> dict:
        """`grid=(8, 3)`, `dimension_semantics=(parallel, arbitrary)`,
        `kernel_grid` (the verifier wants its parallel dimensions a prefix),
        `cores=2` (emit_pipeline's), `no_pipelining`: the op's properties."""
        values = self.options(options, "pipeline", _PIPELINE_OPTIONS)
        grid = values.get("grid")
        if grid is None and looks_ahead:
            raise self.error(token, errors.GRID_LOOKAHEAD)
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
            self.check_semantics(token, semantics, grid)
            properties["dimension_semantics"] = semantics_attr(semantics)
        if "no_pipelining" in values:
            properties["no_pipelining"] = UnitAttr()
        if "kernel_grid" in values:
            properties["kernel_grid"] = UnitAttr()
        if "cores" in values:
            properties["cores"] = IntAttr(values["cores"])
        return properties

    def check_semantics(
        self, token: Token, semantics: list[Token], grid: list[int]
    ) -> None:
        """`dimension_semantics` names a known semantics, one per grid
        dimension."""
        for name in semantics:
            if name not in SEMANTICS:
                raise self.error(
                    name,
                    errors.DIMENSION_SEMANTICS.format(name=name),
                    did_you_mean(str(name), SEMANTICS),
                )
        if len(semantics) != len(grid):
            raise self.error(
                semantics[0] if semantics else token,
                errors.DIMENSION_SEMANTICS_COUNT.format(
                    count=len(semantics), rank=len(grid)
                ),
            )

    def pipeline_spec(self, spec: Tree, rank: int) -> tuple:
        """`in x block=(...) index=(i, j) -> (...) buffers=3`: the ref, its
        direction, block dims, index map and buffer count."""
        direction = _DIRECTIONS[spec.data]
        output = direction != IN
        parts = children(spec)
        name, *items = parts[1:] if output else parts
        ref = self.lookup(name)
        label = f"{direction} {name}"
        known = _INOUT_OPTIONS if direction == INOUT else _SPEC_OPTIONS
        values = self.options(items, label, known)
        if output and "revisit" in values:
            raise self.error(_option_token(items, "revisit"), errors.REVISIT_MODE)
        if output and "lookahead" in values:
            at = _option_token(items, "lookahead")
            raise self.error(at, errors.OUTPUT_LOOKAHEAD)
        for required in ("block", "index"):
            if required not in values:
                raise self.error(
                    name,
                    errors.OPTION_VALUE.format(
                        option=required, stmt=label, why="is required"
                    ),
                )
        index_tree, values["block"] = self.bounded_slices(
            values["index"], values["block"]
        )
        self.check_window(ref, values["block"], name)
        index_map = self.index_map(index_tree, rank, str(name))
        block = values["block"]
        if direction != INOUT:
            buffers = values.get("buffers", 2)
            lookahead = "lookahead" in values
            return ref, direction, block, index_map, buffers, 0, lookahead
        counts = values.get("buffers", [2, 1])
        if len(counts) == 1 and _is_int(_option_value(items, "buffers")):
            counts = [counts[0], 1]  # Pallas' `_normalize_buffer_count`
        if len(counts) != 2:
            raise self.error(_option_token(items, "buffers"), errors.INOUT_BUFFERS)
        return ref, direction, block, index_map, *counts

    def check_window(self, ref: SSAValue, block: list, at: Token) -> None:
        """A block size below 1 makes no window (no ref has an empty
        dimension), nor does a block of another rank than its ref's (past
        the limit of dimensions), so the IR cannot hold them: the
        verifier's message for that block, here."""
        rank = len(ref.type.get_shape()) if isinstance(ref.type, RefType) else 0
        sizes = all(b.kind.data == SQUEEZED or b.size.data >= 1 for b in block)
        if sizes and len(block) == rank:
            return
        try:
            type = expect_ref("pipeline", "operand", ref)
            shape, element = type.get_shape(), type.element_type
            bref = BufferedRefType(shape, element, block, 2, "vmem")
            BufferedRefOp.check_type(bref, describe(ref))
        except CopyIRError as err:
            raise err.at(self.loc(at)) from None

    def bounded_slices(
        self, tree: Tree, block: list[BlockDimAttr]
    ) -> tuple[Tree, list[BlockDimAttr]]:
        """A `BoundedSlice(b)` dimension's index is `ds(start, size)`: the
        map keeps the start, the block dimension takes the static size
        (Pallas' `_make_block_slice`)."""
        option, params, *results = tree.children
        kept = [r for r in results if r is not None]
        if not any(b.kind.data == BOUNDED for b in block) or len(kept) != len(block):
            return tree, block
        block = list(block)
        for dim, (result, b) in enumerate(zip(kept, block, strict=True)):
            if b.kind.data != BOUNDED:
                continue
            if not is_call(result, "ds") or len(args := call_args(result)) != 2:
                raise self.error(result, errors.BOUNDED_NEEDS_DS)
            start, size = args
            what = f"The size of {self.source(result)}"
            block[dim] = BlockDimAttr(
                BOUNDED, static_integer(self, size, what), b.bound.data
            )
            kept[dim] = start
        return Tree(tree.data, [option, params, *kept], tree.meta), block

    def index_map(self, tree: Tree, rank: int, ref: str) -> AffineMapAttr:
        """`(i, j) -> (i, 0)`, `i -> (i, 0)`: a lambda from the grid indices
        to block indices; its results are index expressions over its
        parameters, which nothing outside it sees."""
        option, params, *results = children(tree)
        names = self.map_parameters(params, ref)
        if len(names) != rank:
            raise self.error(
                params if names else option,  # `()` has no token of its own
                errors.INDEX_MAP_ARITY.format(name=ref, count=len(names), rank=rank),
            )
        scope = _MapScope(self, names)
        affine = Affine(scope)
        affine.dims = list(scope.values.values())
        results = [r for r in results if r is not None]
        for call in (c for r in results if isinstance(r, Tree) for c in _calls(r)):
            if call.children[0] in COMBINES:
                raise self.error(
                    call,
                    errors.INDEX_MAP_MIN_MAX.format(
                        name=ref, expr=self.source(call), call=call.children[0]
                    ),
                )
        exprs = [checked(self, r, affine.expr(r)) for r in results]
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
        when_token, cond, _, body = children(tree)
        sets, dims = condition(self, cond)
        block = Block()
        properties = {"condition": ArrayAttr([AffineSetAttr(s) for s in sets])}
        self.emit(WhenOp, dims, (), properties, [Region(block)])
        outer = self.open_scope("when", when_token, block)
        self.statements(body)
        self.close_scope(outer)

    def scope_stmt(self, tree: Tree) -> None:
        """`scope { ... }`: a copy.scope; the allocs and semaphores of its
        body are made afresh on every entry, and its names end with it."""
        token, _, body = children(tree)
        block = Block()
        self.emit(ScopeOp, regions=[Region(block)])
        outer = self.open_scope("scope", token, block)
        self.statements(body)
        self.close_scope(outer)


_SPECS = frozenset(("in_spec", "out_spec", "inout_spec"))
_PIPELINE_OPTIONS = {
    "grid": "grid",
    "dimension_semantics": "names",
    "no_pipelining": "flag",
    "kernel_grid": "flag",
    "cores": "int",
}
_SPEC_OPTIONS = {
    "block": "block",
    "index": "map",
    "buffers": "int",
    "revisit": "names",
    "lookahead": "flag",
}


def _option_token(items: list[Tree], name: str) -> Token:
    """The name token of a spec's option `name` (given)."""
    return next(children(i)[0] for i in items if str(children(i)[0]) == name)


def _option_value(items: list[Tree], name: str) -> Tree | Token | None:
    """The value of a spec's option `name` (given)."""
    return next(children(i)[1] for i in items if str(children(i)[0]) == name)


def _is_int(value: Tree | Token | None) -> bool:
    """A bare integer (`3`), not a tuple of one (`(3,)`)."""
    return (
        value is not None
        and getattr(value, "data", None) != "tuple_value"
        and int_literal(value) is not None
    )


_INOUT_OPTIONS = _SPEC_OPTIONS | {"buffers": "counts"}
_DIRECTIONS = {"in_spec": IN, "out_spec": OUT, "inout_spec": INOUT}


def _calls(tree: Tree):
    """The calls in an expression (`min(i, 6)`), outermost first."""
    return tree.find_pred(lambda t: t.data == "call")
