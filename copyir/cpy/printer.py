"""Print copy-dialect IR in the authoring syntax (`.cpy`).

The printer writes what the parser reads back into the same ops. An
unnamed view, semaphore index or index value (`copy.index`) that one
statement of its block uses, right before it and at its location, is
written inline in that statement (`copy_start x[ds(8 * i, 8)] -> ...`):
the parser makes an op of each one the text writes. Any other gets a
statement of its own. Loops, `when` and pipeline bodies print as blocks,
indented; a pipeline's header prints one spec per line. With
`debuginfo`, every statement ends in `loc("file":line:col)` (a `for`,
`when` or `pipeline` has it before its `{`) so that `parse(print(m))`
keeps the locations too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import cast

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    FileLineColLoc,
    IntegerAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Attribute, Block, Operation, OpResult, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr

from copyir import compute
from copyir.compute import Apply, Operand
from copyir.cpy.keywords import AUGMENTED, KEYWORDS
from copyir.dialects.copy import (
    BOUNDED,
    DYNAMIC,
    IN,
    INOUT,
    AllocOp,
    AsyncCopyOp,
    AsyncDmaOp,
    BufferedCopyOp,
    BufferedRefOp,
    BufferedRefType,
    ComputeOp,
    DmaOp,
    ForOp,
    IndexOp,
    InvalidateOp,
    KernelOp,
    OpaqueOp,
    PipelineOp,
    RefType,
    ScopeOp,
    SemaphoreArrayType,
    SemaphoreOp,
    SemIndexOp,
    SyncCopyOp,
    ViewOp,
    WhenOp,
    WindowOp,
    default_index_name,
    describe_type,
)
from copyir.dialects.dma import ProgramOp
from copyir.errors import CopyIRError, format_tuple
from copyir.index import format_condition, format_expr
from copyir.locations import detail_of

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INLINE = (ViewOp, SemIndexOp, IndexOp)


def print_cpy(module: ModuleOp, debuginfo: bool = False) -> str:
    """The module in the authoring syntax; kernels separated by a blank line.

    A kernel already lowered to a DMA program prints as its `.dma` text.
    """
    from copyir.stream import print_dma

    return "\n".join(
        print_dma(op)
        if isinstance(op, ProgramOp)
        else _KernelPrinter(op, debuginfo).text()
        for op in module.ops
    )


def location_suffix(location: Attribute) -> str:
    if not isinstance(location, FileLineColLoc):
        return ""
    file = location.filename.data.replace("\\", "\\\\").replace('"', '\\"')
    return f' loc("{file}":{location.line.data}:{location.column.data})'


class _KernelPrinter:
    def __init__(self, kernel: Operation, debuginfo: bool):
        self.kernel = kernel
        self.debuginfo = debuginfo
        self.names: dict[SSAValue, str] = {}
        self.inline: set[Operation] = set()

    def text(self) -> str:
        kernel = self.kernel
        if not isinstance(kernel, KernelOp):
            return f"# {kernel.name} has no authoring syntax\n"
        self.assign_names(kernel)
        params = ", ".join(
            f"{self.names[arg]}: {describe_type(arg.type)}{self.loc(arg.location)}"
            for arg in kernel.params
        )
        lines = [f"kernel {kernel.kernel_name}({params}){self.loc(kernel.location)} {{"]
        if isinstance(kernel.attributes.get("param_addresses"), DenseArrayBase):
            lines.append(f"  # {_layout_note(kernel)}")
        self.block(kernel.body.block, 1, lines)
        lines.append("}")
        return "\n".join(lines) + "\n"

    def block(self, block: Block, depth: int, lines: list[str]) -> None:
        """The statements of a body, `depth` levels in."""
        pad = "  " * depth
        ops = list(block.ops)
        self.inline.update(self.inline_ops(ops))
        for op in ops:
            if op in self.inline:
                continue
            if isinstance(op, ForOp | WhenOp):
                head = self.loop(op) if isinstance(op, ForOp) else self.when(op)
                lines.append(f"{pad}{head}{self.loc(op.location)} {{")
                self.block(op.body.block, depth + 1, lines)
                lines.append(f"{pad}}}")
                continue
            if isinstance(op, PipelineOp):
                self.pipeline(op, pad, depth, lines)
                continue
            if isinstance(op, ScopeOp):
                lines.append(f"{pad}scope{self.loc(op.location)} {{")
                self.block(op.body.block, depth + 1, lines)
                lines.append(f"{pad}}}")
                continue
            note = _address_note(op)
            lines.append(f"{pad}{self.statement(op)}{self.loc(op.location)}{note}")

    def loc(self, location: Attribute) -> str:
        return location_suffix(location) if self.debuginfo else ""

    def assign_names(self, kernel: KernelOp) -> None:
        """Keep each valid name that no visible name has taken; make up fresh
        ones for the rest. A body's names are visible inside it only, so
        two loops may both name their index `i`. A kernel's parameters keep
        even a keyword as their name (see `KEYWORDS`)."""
        taken = {
            v.name_hint
            for op in kernel.walk()
            if not op.name.startswith("scalar.")  # a computation's region
            for v in [*op.results, *_block_args(op)]
            if v.name_hint
        }
        counter = 0

        def name(value: SSAValue, visible: set[str], word_ok: bool = False) -> None:
            nonlocal counter
            hint = value.name_hint
            if (
                hint
                and _NAME.fullmatch(hint)
                and (word_ok or hint not in KEYWORDS)
                and hint not in visible
            ):
                chosen = hint
            else:
                while f"v{counter}" in taken or f"v{counter}" in visible:
                    counter += 1
                chosen = f"v{counter}"
                taken.add(chosen)
            visible.add(chosen)
            self.names[value] = chosen

        def walk(block: Block, visible: set[str], params: bool = False) -> None:
            for arg in block.args:
                name(arg, visible, word_ok=params)
            for op in block.ops:
                if isinstance(op, ComputeOp):  # its region is an expression
                    continue
                for region in op.regions:
                    for inner in region.blocks:
                        walk(inner, set(visible))
                for result in op.results:
                    name(result, visible)

        walk(kernel.body.block, set(), params=True)

    # -- inline views and index values ------------------------------------

    def inline_ops(self, ops: Sequence[Operation]) -> set[Operation]:
        """The ops written inline: for each statement, the ops its operands'
        text makes, in the order the parser makes them, right before it.

        The parser makes an op of every view, semaphore index and index
        value the text writes, and finds none again; so an op is inline
        where writing it as text makes that very op: unnamed, of an inline
        kind, at its user's location, and written once by its one user (see
        `written_once`). Any other is a statement of its own, named.
        """
        inline: set[Operation] = set()
        written: dict[Operation, dict[SSAValue, list[int]]] = {}

        def written_once(value: SSAValue, user: Operation) -> bool:
            """Whether `user` writes `value` once as text, and all of the
            value's uses are that writing's (`acc[0] += x` uses its view
            twice)."""
            if user not in written:
                counts: dict[SSAValue, list[int]] = {}
                for operand, uses in self.text_operands(user):
                    counts.setdefault(operand, []).append(uses)
                written[user] = counts
            writings = written[user].get(value)
            if writings is None or len(writings) != 1:
                return False
            count = 0
            for use in value.uses:  # stops at the first other user
                if use.operation is not user:
                    return False
                count += 1
            return count == writings[0]

        def made(value: SSAValue, user: Operation) -> list[Operation]:
            """The ops the parser makes for `value`'s text in `user`."""
            owner = value.owner
            if (
                not isinstance(owner, Operation)
                or owner in apart
                or not _inline_candidate(value, user)
                or not written_once(value, user)
            ):
                return []
            ops = []
            for inner in _inline_inputs(owner):
                ops += made(inner, owner)
            return [*ops, owner]

        apart: set[Operation] = set()  # statements of their own
        position = {op: k for k, op in enumerate(ops)}

        def place(i: int, op: Operation) -> None:
            """Mark inline the ops a statement's text makes right before it."""
            while True:
                expected = [
                    o for value, _ in self.text_operands(op) for o in made(value, op)
                ]
                before = ops[max(i - len(expected), 0) : i]
                if expected and list(before) == expected:
                    inline.update(expected)
                    return
                # An op made earlier than the parser would make it (such as
                # a slot computed before the block indices) is a statement
                # of its own; the rest may still be inline.
                early, last = set(expected) - set(before), -1
                for o in expected:
                    if position[o] < last:
                        early.add(o)
                    last = max(last, position[o])
                if not early:
                    return
                apart.update(early)

        for i, op in enumerate(ops):
            if not _inline_candidate_kind(op):
                place(i, op)
        # Then the views and index values that are statements of their own
        # (`v4 = x[ds(8 * i, 8)]`, a view of several users).
        for i, op in enumerate(ops):
            if _inline_candidate_kind(op) and op not in inline:
                place(i, op)
        return inline

    def text_operands(self, op: Operation) -> list[tuple[SSAValue, int]]:
        """The operands a statement writes as text that could make ops, in
        the order the parser reads them, each with the uses the statement
        makes of it."""
        if isinstance(op, ViewOp):
            return [(op.source, 1), *((d, 1) for d in op.dynamic_offsets)]
        if isinstance(op, SemIndexOp):
            return [(op.source, 1), *((d, 1) for d in op.dynamic_indices)]
        if isinstance(op, BufferedCopyOp):
            values = [(d, 1) for d in op.dynamic_indices]
            if op.sem is not None:
                values.append((op.sem, 1))
            if op.dynamic_slot is not None:
                values.append((op.dynamic_slot, 1))
            return values
        if isinstance(op, ComputeOp):
            return self.compute_operands(op)
        if isinstance(op, IndexOp | ForOp | WhenOp | AsyncDmaOp | PipelineOp):
            return []
        return [(v, 1) for v in op.operands]

    def compute_operands(self, op: ComputeOp) -> list[tuple[SSAValue, int]]:
        """A computation's destination, then each input whose `$k` the
        expression names once (a view named twice would be two views)."""
        try:
            expression = op.expression()
        except ValueError:
            return []
        inputs = list(op.inputs)
        augmented = _augmented(op, expression)
        counts = _operand_counts(expression)
        values = []
        if augmented is None and op.dst not in inputs:
            values.append((op.dst, 1))
        elif augmented is not None and counts.get(0) == 1 and inputs.count(op.dst) == 1:
            values.append((op.dst, 2))
        for k, value in enumerate(inputs):
            if value is not op.dst and counts.get(k) == 1 and inputs.count(value) == 1:
                values.append((value, 1))
        return values

    def operand(self, value: SSAValue) -> str:
        """A value's name, followed by the subscripts of inline views."""
        suffixes = []
        while value.owner in self.inline and not isinstance(value.owner, IndexOp):
            owner = cast("ViewOp | SemIndexOp", value.owner)  # the other inline ops
            suffixes.append(self.subscripts(owner))
            value = owner.source
        return self.names[value] + "".join(reversed(suffixes))

    def index(self, value: int | SSAValue | None) -> str:
        """An index: an integer, a name, or an inline index expression."""
        if value is None or isinstance(value, int):
            return str(value)
        owner = value.owner
        if owner in self.inline and isinstance(owner, IndexOp):
            return _index_text(owner, self.arg_names(owner.args))
        return self.names[value]

    def arg_names(self, values: Sequence[SSAValue]) -> list[str]:
        return [self.names[v] for v in values]

    def subscripts(self, op: ViewOp | SemIndexOp) -> str:
        """`[0:32, :]`, `[ds(8 * i, 8), 3]`: `:` for a whole dimension,
        `ds(start, size)` for a slice whose start is an index value."""
        if isinstance(op, SemIndexOp):
            return f"[{', '.join(self.index(i) for i in op.starts())}]"
        source = op.source.type
        shape = source.get_shape() if isinstance(source, RefType) else ()
        parts = []
        for dim, (start, (_, size, dropped)) in enumerate(
            zip(op.starts(), op.subscripts(), strict=True)
        ):
            if dropped:
                parts.append(self.index(start))
            elif not isinstance(start, int):
                parts.append(f"ds({self.index(start)}, {size})")
            elif dim < len(shape) and start == 0 and size == shape[dim]:
                parts.append(":")
            else:
                parts.append(f"{start}:{start + size}")
        return f"[{', '.join(parts)}]"

    # -- statements --------------------------------------------------------

    def statement(self, op: Operation) -> str:
        if isinstance(op, ViewOp | SemIndexOp):
            return (
                f"{self.names[op.result]} = {self.operand(op.source)}"
                f"{self.subscripts(op)}"
            )
        if isinstance(op, IndexOp):
            return f"{self.names[op.result]} = {self.index_expression(op)}"
        if isinstance(op, AllocOp):
            return f"{self.names[op.result]} = alloc {describe_type(op.result.type)}"
        if isinstance(op, SemaphoreOp):
            type = op.result.type
            dims = (
                f"[{', '.join(map(str, type.get_shape()))}]"
                if isinstance(type, SemaphoreArrayType)
                else ""
            )
            return f"{self.names[op.result]} = semaphore{dims}"
        if isinstance(op, BufferedRefOp):
            text = buffered_ref_text(op.result.type)
            padded = ", padded" if op.padded is not None else ""
            return f"{self.names[op.result]} = {text}{padded}"
        if isinstance(op, DmaOp):
            return self.dma(op)
        if isinstance(op, SyncCopyOp):
            return self.sync_copy(op)
        if isinstance(op, BufferedCopyOp):
            return self.buffered_copy(op)
        if isinstance(op, AsyncCopyOp):
            src, dst, sem = (self.operand(v) for v in (op.src, op.dst, op.sem))
            return f"{self.names[op.result]} = async_copy {src} -> {dst}, {sem}"
        if isinstance(op, AsyncDmaOp):
            return self.async_dma(op)
        if isinstance(op, ComputeOp):
            return self.compute(op)
        if isinstance(op, WindowOp):
            slot = self.index(op.slot_value)
            return f"{self.names[op.result]} = window {self.operand(op.bref)}[{slot}]"
        if isinstance(op, InvalidateOp):
            stale = " stale" if op.stale is not None else ""
            return f"invalidate {self.operand(op.ref)}{stale}"
        if isinstance(op, OpaqueOp):
            reads, writes = (
                ", ".join(self.operand(v) for v in side)
                for side in (op.reads, op.writes)
            )
            keeps = " keeps" if op.keeps is not None else ""
            return f"opaque {_quoted(op.what.data)} ({reads}) -> ({writes}){keeps}"
        return f"# {op.name} has no authoring syntax"

    def index_expression(self, op: IndexOp) -> str:
        """`i % 2`; `i + 0` for a bare index (`slot = i` would be an alias)."""
        affine_map = op.map.data
        if not op.well_formed():
            return f"# a copy.index the authoring syntax cannot write: {affine_map}"
        text = _index_text(op, self.arg_names(op.args))
        bare = op.combine is None and isinstance(affine_map.results[0], AffineDimExpr)
        return f"{text} + 0" if bare else text

    def loop(self, op: ForOp) -> str:
        names = ", ".join(self.names[i] for i in op.indices)
        bounds = op.bounds
        if op.grid is not None:
            extent = f"grid({', '.join(str(hi) for _, hi in bounds)})"
        elif bounds and bounds[0][0] == 0:
            extent = f"range({bounds[0][1]})"
        else:
            extent = f"range({', '.join(map(str, bounds[0] if bounds else ()))})"
        parallel = ""
        if op.dimension_semantics is not None:
            parallel = f", parallel={format_tuple(op.parallel_dims)}"
        return f"for {names} in {extent}{parallel}"

    def pipeline(self, op: PipelineOp, pad: str, depth: int, lines: list[str]) -> None:
        """`pipeline grid=(8, 3) ...`, then one spec per line and the body's
        names, indented, then the body. The grid indices are named when the
        body names or uses them; the index maps' parameters take their
        names."""
        problem = _pipeline_problem(op)
        if problem is not None:
            lines.append(
                f"{pad}# a pipeline the authoring syntax cannot write: {problem}"
            )
            return
        grid = op.grid_shape
        head = "pipeline" + " kernel_grid" * (op.kernel_grid is not None)
        head += f" grid={format_tuple(grid)}"
        if op.dimension_semantics is not None:
            semantics = (s.data for s in op.dimension_semantics.data)
            head += f" dimension_semantics={format_tuple(semantics)}"
        if op.cores is not None:
            head += f" cores={op.cores.data}"
        if op.no_pipelining is not None:
            head += " no_pipelining"
        lines.append(pad + head)
        indices = op.indices
        named = any(i.name_hint is not None or i.uses for i in indices)
        params = (
            self.arg_names(indices)
            if named
            else [default_index_name(k) for k in range(len(grid))]
        )
        specs = _pipeline_specs(op)
        wide = {direction for _, direction, *_ in specs} - {IN}
        width = max((len(d) for d in wide), default=2)
        for ref, direction, block, index_map, buffers, looks_ahead in specs:
            word = f"{direction:<{width}} " if wide else "in "
            dims = format_tuple(b.describe() for b in block.data)
            results = index_map.data.results
            mapped = (
                _map_result(e, b, params)
                for e, b in zip(results, block.data, strict=True)
            )
            lambda_text = f"({', '.join(params)}) -> ({', '.join(mapped)})"
            spec = f"{word}{self.names[ref]} block={dims} index={lambda_text}"
            if direction == INOUT:
                spec += f" buffers={format_tuple(buffers)}" * (buffers != (2, 1))
            else:
                spec += f" buffers={buffers[0]}" * (buffers[0] != 2)
            spec += " lookahead" * looks_ahead
            lines.append(f"{pad}    {spec}")
        names = self.arg_names(op.windows + (indices if named else ()))
        lines.append(f"{pad}    ({', '.join(names)}){self.loc(op.location)} {{")
        self.block(op.body.block, depth + 1, lines)
        lines.append(f"{pad}}}")

    def when(self, op: WhenOp) -> str:
        sets = [attr.data for attr in op.condition.data]
        return f"when {format_condition(sets, self.arg_names(op.args))}"

    def sync_copy(self, op: SyncCopyOp) -> str:
        try:
            src_tree, dst_tree = op.trees()
            for tree, leaves in ((src_tree, op.srcs), (dst_tree, op.dsts)):
                if tree.num_leaves != len(leaves):
                    raise CopyIRError(f"{tree.spec} does not fit {len(leaves)} leaves")
        except CopyIRError as err:
            return f"# a sync_copy the authoring syntax cannot write: {err}"
        src = src_tree.render([self.operand(v) for v in op.srcs])
        dst = dst_tree.render([self.operand(v) for v in op.dsts])
        add = ", add" if op.add is not None else ""
        return f"sync_copy {src} -> {dst}{add}"

    def dma(self, op: DmaOp) -> str:
        action = op.action.data
        head = {"start": "copy_start", "wait": "copy_wait"}.get(action)
        if head is None:
            head = f"dma {_quoted(action)}"
        src, dst, sem = (self.operand(v) for v in (op.src, op.dst, op.sem))
        return f"{head} {src} -> {dst}, {sem}{_dma_options(op)}"

    def async_dma(self, op: AsyncDmaOp) -> str:
        """`c.start(add, priority=1)`, `c.wait()`."""
        action = op.action.data
        if not _NAME.fullmatch(action):
            return f"# an async_dma the authoring syntax cannot write: {action!r}"
        options = _dma_options(op).removeprefix(", ")
        return f"{self.names[op.descriptor]}.{action}({options})"

    def buffered_copy(self, op: BufferedCopyOp) -> str:
        """`buffered_copy [start|wait] x -> bx[i, j][, sem], slot=s`."""
        dynamic = iter(op.dynamic_indices)
        src = self.names[op.src] + self.block_indices(op.src_indices, dynamic)
        dst = self.names[op.dst] + self.block_indices(op.dst_indices, dynamic)
        action = op.action_value
        head = "buffered_copy"
        if action is not None:
            head += f" {action if action in ('start', 'wait') else _quoted(action)}"
        sem = f", {self.operand(op.sem)}" if op.sem is not None else ""
        slot = op.slot_value
        slot_text = f", slot={self.index(slot)}" if not isinstance(slot, int) else ""
        if isinstance(slot, int) and op.slot is not None:
            slot_text = f", slot={slot}"
        return f"{head} {src} -> {dst}{sem}{slot_text}"

    def block_indices(self, attr, dynamic: Iterator[SSAValue]) -> str:
        if attr is None:
            return ""
        parts = [
            self.index(next(dynamic, None)) if i == DYNAMIC else str(i)
            for i in attr.get_values()
        ]
        return f"[{', '.join(parts)}]"

    def compute(self, op: ComputeOp) -> str:
        """`yw[...] = 2.0 * xw + 1.0`, `acc += xw`: `[...]` marks a whole
        ref as the destination (`acc = ...` would define a name)."""
        try:
            expression = op.expression()
        except ValueError as err:
            return f"# a computation the authoring syntax cannot write: {err}"
        names = [self.operand(v) for v in op.inputs]
        if any(
            isinstance(n, Operand) and n.index >= len(names)
            for n in compute.nodes(expression)
        ):
            return "# a computation the authoring syntax cannot write: no such operand"
        dst = self.operand(op.dst)
        augmented = _augmented(op, expression)
        if augmented is not None:
            rhs = compute.format_infix(cast(Apply, expression).args[1], names)
            return f"{dst} {AUGMENTED[augmented]} {rhs}"
        if dst == self.names.get(op.dst):
            dst += "[...]"
        return f"{dst} = {compute.format_infix(expression, names)}"


def _inline_candidate(value: SSAValue, user: Operation) -> bool:
    """Whether `value` is an op the parser could make from inline text in
    `user`: unnamed, of an inline kind, at the user's location; an index
    value only as an expression the parser would not fold away."""
    owner = value.owner
    if not (
        isinstance(value, OpResult)
        and isinstance(owner, _INLINE)
        and value.name_hint is None
        and owner.location == user.location
    ):
        return False
    if isinstance(owner, IndexOp):
        affine_map = owner.map.data
        return owner.well_formed() and (
            owner.combine is not None
            or not isinstance(affine_map.results[0], AffineConstantExpr | AffineDimExpr)
        )
    return True


def _index_text(op: IndexOp, names: Sequence[str]) -> str:
    """`8 * i + 8`; `min(128 * i, 872)` for a min (of a well-formed op)."""
    texts = [format_expr(r, names) for r in op.map.data.results]
    if op.combine is None:
        return texts[0]
    return f"{op.combine.data.value}({', '.join(texts)})"


def _inline_candidate_kind(op: Operation) -> bool:
    """Whether an op might be written inline, by its kind and name alone."""
    return isinstance(op, _INLINE) and op.results[0].name_hint is None


def _inline_inputs(owner: Operation) -> list[SSAValue]:
    """What the text of an inline op is written from, in the parser's order:
    a view's source, then its index values; an index value's are names."""
    if isinstance(owner, IndexOp):
        return []
    owner = cast("ViewOp | SemIndexOp", owner)  # the other inline ops
    dynamic = (
        owner.dynamic_offsets if isinstance(owner, ViewOp) else owner.dynamic_indices
    )
    return [owner.source, *dynamic]


def _map_result(expr, block, params) -> str:
    """An index map's result: a bounded dimension's is `ds(start, size)`."""
    text = format_expr(expr, params)
    if block.kind.data == BOUNDED:
        return f"ds({text}, {block.size.data})"
    return text


def _block_text(block) -> str:
    """A `buffered_ref`'s block dimension: a bounded one with its slice's
    size when that is not the whole bound (`BoundedSlice(8, 6)`)."""
    if block.kind.data == BOUNDED and block.size.data != block.bound.data:
        return f"BoundedSlice({block.bound.data}, {block.size.data})"
    return block.describe()


def _pipeline_specs(op: PipelineOp) -> list[tuple]:
    """Per operand: ref, direction, block dims, index map, buffer counts
    (an `inout`'s two, another's one), lookahead."""
    return [
        (
            ref,
            s.direction.data,
            s.block,
            s.index_map,
            s.counts if s.direction.data == INOUT else (s.buffers.data,),
            s.looks_ahead,
        )
        for ref, s in zip(op.refs, op.ref_specs.data, strict=True)
    ]


def _pipeline_problem(op: PipelineOp) -> str | None:
    """Why the authoring syntax cannot write a pipeline, or None."""
    rank = len(op.grid_shape)
    try:
        specs = _pipeline_specs(op)
    except ValueError:
        return "its specs disagree in number"
    if len(op.body.block.args) != len(specs) + rank:
        return "its body takes no window per operand and index per grid dimension"
    semantics = op.dimension_semantics
    if semantics is not None and len(semantics) != rank:
        return "its dimension semantics are not one per grid dimension"
    for _, _, _, index_map, _, _ in specs:
        affine_map = index_map.data
        if affine_map.num_dims != rank or affine_map.num_symbols:
            return f"its index map {affine_map} does not take the grid's {rank} indices"
    return None


def _augmented(op: ComputeOp, expression) -> str | None:
    """The operation of `dst op= rhs` when the computation is one: its
    first input is its destination, and it applies `op` to that and a rest."""
    if (
        isinstance(expression, Apply)
        and expression.operation in AUGMENTED
        and expression.args[0] == Operand(0)
        and op.inputs
        and op.inputs[0] is op.dst
    ):
        return expression.operation
    return None


def _operand_counts(expression) -> dict[int, int]:
    counts: dict[int, int] = {}
    for node in compute.nodes(expression):
        if isinstance(node, Operand):
            counts[node.index] = counts.get(node.index, 0) + 1
    return counts


def _block_args(op: Operation) -> list[SSAValue]:
    if isinstance(op, ComputeOp):  # its region's values have no names here
        return []
    return [
        arg for region in op.regions for block in region.blocks for arg in block.args
    ]


def _quoted(text: str) -> str:
    """A string literal that the parser reads back as `text` (which holds
    no line break: a literal cannot)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _dma_options(op: DmaOp | AsyncDmaOp) -> str:
    options = ", add" if op.add is not None else ""
    if op.priority is not None:
        options += f", priority={op.priority_value}"
    return options


def _address_note(op: Operation) -> str:
    """A comment on what the passes decided: where a buffer lives, which id a
    semaphore has, which pytree leaf or block a DMA came from."""
    address, sem_id = op.attributes.get("address"), op.attributes.get("sem_id")
    if isinstance(address, IntegerAttr) and isinstance(op, AllocOp):
        space = cast(RefType, op.result.type).space_name
        return f"  # {space}+{address.value.data}"
    if isinstance(sem_id, IntegerAttr):
        return f"  # sem {sem_id.value.data}"
    if detail := detail_of(op.location):
        return f"  # {detail}"
    return ""


def _layout_note(kernel: KernelOp) -> str:
    array = cast("DenseArrayBase[I64]", kernel.attributes["param_addresses"])
    addresses = array.get_values()
    places = ", ".join(
        f"{name} at hbm+{address}"
        for name, address in zip(kernel.param_names, addresses, strict=False)
    )
    target = kernel.attributes.get("target")
    known = target.data if isinstance(target, StringAttr) else "?"
    return f"target {known}: {places}"


def buffered_ref_text(type: BufferedRefType) -> str:
    array = type.array_type.describe().removesuffix(" @hbm")
    dims = [_block_text(b) for b in type.block_dims]
    block = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
    text = f"buffered_ref {array}, block={block}, buffers={type.buffers.data}"
    if type.space.data != "vmem":
        text += f", space={type.space.data}"
    return text
