"""`.cpy` statements that define a name (`x = alloc ...`, `w = window
...`, an index value) or compute into a ref (`x[...] = expr`, `acc += x`,
`opaque "exp" (x) -> (y)`)."""

from __future__ import annotations

from lark import Tree
from xdsl.dialects.builtin import IndexType, IntegerAttr, StringAttr, UnitAttr, i64
from xdsl.ir import SSAValue

from copyir import errors
from copyir.attributes import segment_sizes
from copyir.compute import Apply, Operand
from copyir.cpy.expressions import (
    Affine,
    computation,
    in_print_order,
    strip_parens,
)
from copyir.cpy.keywords import AUGMENTED
from copyir.cpy.operands import affine_map
from copyir.cpy.options import OptionReader
from copyir.cpy.scope import INDEX, children, unquote
from copyir.dialects.copy import (
    DESCRIPTOR,
    AllocOp,
    AsyncCopyOp,
    BufferedRefOp,
    BufferedRefType,
    ComputeOp,
    IndexOp,
    OpaqueOp,
    RefType,
    SemaphoreArrayType,
    SemaphoreOp,
    SemaphoreType,
    WindowOp,
    body_of,
    describe_type,
    element_type,
    expect_ref,
    ref_type,
)
from copyir.dtypes import BY_NAME, KNOWN_NAMES
from copyir.errors import CopyIRError, Note
from copyir.hints import did_you_mean
from copyir.machine import memory_space


class DefinitionBuilder(OptionReader):
    """Allocations, semaphores, buffered refs, windows, aliases, index values
    and computations."""

    def type(self, tree: Tree, default_space: str) -> RefType:
        dtype_token, *dims, space_token = children(tree)
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
            return ref_type(tuple(shape), dtype.ir, space)  # shared, as views'
        except CopyIRError as err:
            raise err.at(self.loc(tree)) from None

    def assign(self, tree: Tree) -> None:
        """`name = ...` defines a name; `x[...] = expr` computes into x."""
        target, rhs, _ = children(tree)
        name, *subscripts = children(target)
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
            type, padded = self.buffered_ref(rhs)
            properties = {"padded": UnitAttr()} if padded else {}
            op = self.emit(BufferedRefOp, (), [type], properties=properties)
            self.define(name, op.results[0])
        elif kind == "async_copy":
            operands = [self.operand(t) for t in rhs.children]
            op = self.emit(AsyncCopyOp, operands, [DESCRIPTOR])
            self.define(name, op.results[0])
        elif kind == "window":
            self.define(name, self.window(rhs))
        elif strip_parens(rhs).data == "operand":
            value = self.operand(strip_parens(rhs))
            if value.name_hint is None:
                self.define(name, value)
            else:  # another name for a named value: an alias, defined once too
                self.define_alias(name, value)
        else:  # an index value: `slot = i % 2`
            hint = (Note(errors.HINT_COMPUTE.format(name=name)),)
            affine = Affine(self, hint)
            combine, exprs = affine.results(rhs)
            if combine is not None:
                self.define(name, self.combined(combine, exprs, affine.dims))
                return
            (expr,), dims = in_print_order(exprs, affine.dims)
            op = self.emit(IndexOp, dims, [INDEX], {"map": affine_map(expr, len(dims))})
            self.define(name, op.results[0])

    def augassign(self, tree: Tree) -> None:
        """`acc += x` is `acc[...] = acc + x`, with acc evaluated once."""
        target, operator, rhs, _ = children(tree)
        self.compute(target, rhs, _OPERATION_OF[str(operator)])

    def compute(self, target: Tree, rhs: Tree, augmented: str | None) -> None:
        """A computation: the destination's views, then the inputs' views in
        the order the expression names them (`$k` is the k-th distinct
        input value)."""
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
        body = body_of(expression, element_type(dst), len(inputs), self.location)
        self.emit(ComputeOp, [dst, *inputs], regions=[body])

    def opaque(self, tree: Tree) -> None:
        """`opaque "exp" (x, s) -> (y)`: the refs it reads, then the refs it
        writes, each as written (views allowed)."""
        _, what, reads, writes, keeps, _ = children(tree)
        sides = [
            [self.operand(ref) for ref in children(side) if ref is not None]
            for side in (reads, writes)
        ]
        properties = {
            "what": StringAttr(unquote(what)),
            "operandSegmentSizes": segment_sizes(tuple(len(s) for s in sides)),
        }
        if keeps is not None:
            properties["keeps"] = UnitAttr()
        self.emit(OpaqueOp, [*sides[0], *sides[1]], properties=properties)

    def window(self, tree: Tree) -> SSAValue:
        """`window bx[s]`: slot s of the BufferedRef's window, as a ref."""
        name, slot_tree = children(tree)
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

    def buffered_ref(self, tree: Tree) -> tuple[BufferedRefType, bool]:
        """The type of `buffered_ref x, block=..., buffers=n, space=s`, and
        whether it is `padded` (a `pallas_call` grid's blocks)."""
        array, *options = children(tree)
        if isinstance(array, Tree):
            array_type = self.type(array, "hbm")
        else:
            value = self.lookup(array)
            try:
                array_type = expect_ref("buffered_ref", "array", value)
            except CopyIRError as err:
                raise err.at(self.loc(array)) from None
        known = {"block": "block", "buffers": "int", "space": "name", "padded": "flag"}
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
        type = BufferedRefType(
            array_type.get_shape(),
            array_type.element_type,
            values["block"],
            values.get("buffers", 2),
            space,
        )
        return type, bool(values.get("padded"))


_DEFINITIONS = {
    "alloc": "alloc",
    "semaphore": "semaphore",
    "buffered_ref": "buffered_ref",
    "async_copy": "async_copy",
    "window": "window",
}
_OPERATION_OF = {spelling: operation for operation, spelling in AUGMENTED.items()}
"""The operation of each augmented assignment (`+=` adds)."""
