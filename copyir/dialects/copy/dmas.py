"""DMAs: `copy.dma` (start or wait a copy), copy descriptors
(`copy.async_copy`, `copy.async_dma`) and the pytree `copy.sync_copy`.

The ops follow the TPU copy helpers of JAX Pallas: `copy.dma` is
`make_async_copy(...).start()` / `.wait()`, `copy.async_copy` is the
descriptor `make_async_copy` returns, and `copy.sync_copy` is the pytree
`sync_copy` helper.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import I64, IntegerAttr, StringAttr, UnitAttr, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect

from copyir import errors, pytree
from copyir.errors import CopyIRError, Note

from .base import (
    ActionConstraint,
    CopyOp,
    DmaAction,
    action_attr,
    check_action,
    check_dma_types,
    check_ends,
    check_no_overlap,
    check_start_options,
    create_typed,
    describe,
    expect_descriptor,
    expect_ref,
    parse_operands,
    print_attributes_and_types,
    same_ref_type,
    set_name,
    types_note,
)
from .types import DescriptorType, RefType, SemaphoreType, parse_i64

if TYPE_CHECKING:
    from copyir.access import Accesses


class StartOrWaitOp(CopyOp):
    """An op that starts a DMA or waits for it: its action is exactly
    `start` or `wait`, as in Pallas' `_copy_start_or_wait`, and only a start
    takes `add` and a priority."""

    action = prop_def(ActionConstraint)
    add = opt_prop_def(UnitAttr)
    priority = opt_prop_def(IntegerAttr[I64])

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(
        self, action: str, operands: Sequence[SSAValue], add: bool, priority: int
    ):
        """The builders' common part: the action checked eagerly."""
        check_action(action)
        super().__init__(
            operands=operands,
            properties=self.option_properties(action, add, priority),
        )

    @staticmethod
    def option_properties(action: str, add: bool, priority: int) -> dict:
        properties: dict[str, Attribute] = {"action": action_attr(action)}
        if add:
            properties["add"] = UnitAttr()
        if priority:
            properties["priority"] = IntegerAttr(priority, i64)
        return properties

    @property
    def is_start(self) -> bool:
        return self.action.data == DmaAction.START

    @property
    def priority_value(self) -> int:
        return self.priority.value.data if self.priority is not None else 0

    @staticmethod
    def parse_action(parser: Parser) -> dict[str, Attribute]:
        """`"start"` (any word: the verifier says which are actions)."""
        return {"action": action_attr(parser.parse_str_literal())}

    @staticmethod
    def parse_options(parser: Parser, properties: dict[str, Attribute]) -> None:
        """`add` and `priority 1`, if there."""
        if parser.parse_optional_keyword("add") is not None:
            properties["add"] = UnitAttr()
        if parser.parse_optional_keyword("priority") is not None:
            properties["priority"] = IntegerAttr(parse_i64(parser), i64)

    def print_action(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(str(self.action.data))
        printer.print_string(" ")

    def print_options(self, printer: Printer) -> None:
        if self.add is not None:
            printer.print_string(" add")
        if self.priority is not None:
            printer.print_string(f" priority {self.priority_value}")

    def check_options(self) -> None:
        check_action(self.action.data)
        priority = None if self.priority is None else self.priority_value
        check_start_options(self.is_start, self.add is not None, priority)


@irdl_op_definition
class DmaOp(StartOrWaitOp):
    """Start a DMA, or wait for one: `make_async_copy(src, dst, sem)`.

    `copy.dma "start" %src, %dst, %sem add priority 1 : ...`. A start moves
    src into dst (adding when `add` is set) and raises sem by the bytes of
    the copy when it completes; a wait names the same descriptor and lowers
    sem by that many bytes once they have arrived.
    """

    name = "copy.dma"

    src = operand_def(RefType)
    dst = operand_def(RefType)
    sem = operand_def(SemaphoreType)

    def __init__(
        self,
        action: str,
        src: SSAValue,
        dst: SSAValue,
        sem: SSAValue,
        *,
        add: bool = False,
        priority: int = 0,
    ):
        super().__init__(action, [src, dst, sem], add, priority)

    def written(self) -> tuple[SSAValue, ...]:
        return (self.dst,)

    @property
    def label(self) -> str:
        return "copy_start" if self.is_start else "copy_wait"

    def check(self) -> None:
        check_action(self.action.data)
        expect_descriptor(self.label, self.src, self.dst, self.sem)
        self.check_options()
        check_ends(self.src, self.dst)

    def verify_accesses(self, accesses: Accesses) -> None:
        """A start's source and destination must not overlap. A wait names
        its descriptor for the byte count only and moves nothing."""
        if self.is_start:
            check_no_overlap(self.src, self.dst, accesses)

    @classmethod
    def parse(cls, parser: Parser) -> DmaOp:
        properties = cls.parse_action(parser)
        operands = parse_operands(parser)
        cls.parse_options(parser, properties)
        return create_typed(cls, parser, operands, properties)

    def print(self, printer: Printer) -> None:
        self.print_action(printer)
        printer.print_list(self.operands, printer.print_operand)
        self.print_options(printer)
        print_attributes_and_types(printer, self)


@irdl_op_definition
class AsyncCopyOp(CopyOp):
    """A copy descriptor, `pltpu.make_async_copy(src, dst, sem)`:
    `%c = copy.async_copy %src, %dst, %sem : ...`. It names its three
    values as evaluated where it is made; `copy.async_dma` starts or waits
    it."""

    name = "copy.async_copy"

    src = operand_def(RefType)
    dst = operand_def(RefType)
    sem = operand_def(SemaphoreType)
    result = result_def(DescriptorType)

    def __init__(
        self, src: SSAValue, dst: SSAValue, sem: SSAValue, name: str | None = None
    ):
        super().__init__(operands=[src, dst, sem], result_types=[DescriptorType()])
        set_name(self.result, name)

    def written(self) -> tuple[SSAValue, ...]:
        return (self.dst,)

    def check(self) -> None:
        expect_descriptor("async_copy", self.src, self.dst, self.sem)
        check_ends(self.src, self.dst)

    def verify_accesses(self, accesses: Accesses) -> None:
        check_no_overlap(self.src, self.dst, accesses)

    @classmethod
    def parse(cls, parser: Parser) -> AsyncCopyOp:
        operands = parse_operands(parser)
        return create_typed(cls, parser, operands, {}, [DescriptorType()])

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        print_attributes_and_types(printer, self)


@irdl_op_definition
class AsyncDmaOp(StartOrWaitOp):
    """Start or wait a descriptor: `copy.async_dma "start" %c add priority 1`
    is `c.start()`, `"wait"` is `c.wait()`."""

    name = "copy.async_dma"

    descriptor = operand_def(DescriptorType)

    def __init__(
        self, action: str, descriptor: SSAValue, *, add: bool = False, priority: int = 0
    ):
        super().__init__(action, [descriptor], add, priority)

    def check(self) -> None:
        self.check_options()

    @classmethod
    def parse(cls, parser: Parser) -> AsyncDmaOp:
        properties = cls.parse_action(parser)
        descriptor = parser.resolve_operand(
            parser.parse_unresolved_operand(), DescriptorType()
        )
        cls.parse_options(parser, properties)
        attributes = parser.parse_optional_attr_dict()
        return cls.create(
            operands=[descriptor], properties=properties, attributes=attributes
        )

    def print(self, printer: Printer) -> None:
        self.print_action(printer)
        printer.print_operand(self.descriptor)
        self.print_options(printer)
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class SyncCopyOp(CopyOp):
    """Synchronously copy a pytree of refs into another, leaf by leaf.

    `copy.sync_copy (%a, %b) -> {x: %va, y: %vb} add : !t0, !t1 -> !t2, !t3`.
    The operands are the leaves in JAX's leaf order; `src_tree` and
    `dst_tree` hold the two structures as spec strings.
    """

    name = "copy.sync_copy"

    srcs = var_operand_def(RefType)
    dsts = var_operand_def(RefType)
    src_tree = prop_def(StringAttr)
    dst_tree = prop_def(StringAttr)
    add = opt_prop_def(UnitAttr)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def written(self) -> tuple[SSAValue, ...]:
        return tuple(self.dsts)

    def __init__(
        self,
        src_tree: pytree.TreeDef,
        srcs: Sequence[SSAValue],
        dst_tree: pytree.TreeDef,
        dsts: Sequence[SSAValue],
        *,
        add: bool = False,
    ):
        super().__init__(
            operands=[srcs, dsts],
            properties=self.tree_properties(src_tree, dst_tree, add),
        )

    @staticmethod
    def tree_properties(
        src_tree: pytree.TreeDef, dst_tree: pytree.TreeDef, add: bool
    ) -> dict[str, Attribute]:
        properties: dict[str, Attribute] = {
            "src_tree": StringAttr(src_tree.spec),
            "dst_tree": StringAttr(dst_tree.spec),
        }
        if add:
            properties["add"] = UnitAttr()
        return properties

    def trees(self) -> tuple[pytree.TreeDef, pytree.TreeDef]:
        return (
            pytree.parse_spec(self.src_tree.data),
            pytree.parse_spec(self.dst_tree.data),
        )

    def check(self) -> None:
        src_tree, dst_tree = self.trees()
        for tree, values in ((src_tree, self.srcs), (dst_tree, self.dsts)):
            if tree.num_leaves != len(values):
                raise CopyIRError(
                    errors.TREE_LEAF_COUNT.format(
                        spec=tree.spec, leaves=tree.num_leaves, count=len(values)
                    )
                )
        if src_tree != dst_tree:
            raise CopyIRError(
                errors.TREE_MISMATCH.format(
                    src=src_tree.render([describe(v) for v in self.srcs]),
                    dst=dst_tree.render([describe(v) for v in self.dsts]),
                )
            )
        leaves = zip(self.srcs, self.dsts, strict=True)
        if not all(same_ref_type(src.type, dst.type) for src, dst in leaves):
            self._check_leaves(src_tree)

    def verify_accesses(self, accesses: Accesses) -> None:
        """No leaf's source and destination overlap."""
        leaves = zip(self.srcs, self.dsts, strict=True)
        if any(accesses.overlap(src, dst) for src, dst in leaves):
            self._check_leaves(self.trees()[0], accesses)

    def _check_leaves(
        self, tree: pytree.TreeDef, accesses: Accesses | None = None
    ) -> None:
        """Each leaf's checks in leaf order (with `accesses`, the overlap
        too), so that the first error names its leaf."""
        for path, src, dst in zip(tree.leaf_paths(), self.srcs, self.dsts, strict=True):
            role = f"leaf {path}" if path else "leaf"
            src_type = expect_ref("sync_copy", f"source {role}", src)
            dst_type = expect_ref("sync_copy", f"destination {role}", dst)
            try:
                check_dma_types(src_type, dst_type)
                if accesses is not None:
                    check_no_overlap(src, dst, accesses)
            except CopyIRError as err:
                note = Note(f"at {role}: {types_note(src, dst)}")
                raise CopyIRError(err.message, notes=(note,)) from None

    @classmethod
    def parse(cls, parser: Parser) -> SyncCopyOp:
        src_spec, srcs = _parse_tree_side(parser)
        parser.parse_punctuation("->")
        dst_spec, dsts = _parse_tree_side(parser)
        add = parser.parse_optional_keyword("add") is not None
        parser.parse_punctuation(":")
        pos = parser.pos
        src_types = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_type
        )
        parser.parse_punctuation("->")
        dst_types = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_type
        )
        if len(src_types) != len(srcs) or len(dst_types) != len(dsts):
            parser.raise_error("sync_copy needs one type per leaf", pos, parser.pos)
        properties: dict[str, Attribute] = {
            "src_tree": StringAttr(src_spec),
            "dst_tree": StringAttr(dst_spec),
        }
        if add:
            properties["add"] = UnitAttr()
        return cls.build(
            operands=[
                parser.resolve_operands(srcs, src_types, pos),
                parser.resolve_operands(dsts, dst_types, pos),
            ],
            properties=properties,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_tree_side(printer, self.src_tree.data, list(self.srcs))
        printer.print_string(" -> ")
        _print_tree_side(printer, self.dst_tree.data, list(self.dsts))
        if self.add is not None:
            printer.print_string(" add")
        printer.print_string(" : (")
        printer.print_list([v.type for v in self.srcs], printer.print_attribute)
        printer.print_string(") -> (")
        printer.print_list([v.type for v in self.dsts], printer.print_attribute)
        printer.print_string(")")


def _parse_tree_side(parser: Parser) -> tuple[str, list[UnresolvedOperand]]:
    """A pytree of operands, or `spec "..." (%a, ...)` for a malformed one."""
    if parser.parse_optional_keyword("spec") is not None:
        spec = parser.parse_str_literal()
        leaves = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        return spec, leaves
    tree, leaves = pytree.flatten(_parse_tree(parser))
    return tree.spec, leaves


def _print_tree_side(printer: Printer, spec: str, leaves: list[SSAValue]) -> None:
    """The pytree with its operands; a spec that does not fit them is printed
    as `spec "..."` and a flat operand list, so invalid IR round-trips too."""
    try:
        tree = pytree.parse_spec(spec)
    except CopyIRError:
        tree = None
    if tree is not None and tree.num_leaves == len(leaves):
        _print_tree(printer, tree, iter(leaves))
        return
    printer.print_string("spec ")
    printer.print_string_literal(spec)
    printer.print_string(" (")
    printer.print_list(leaves, printer.print_operand)
    printer.print_string(")")


def _parse_tree(parser: Parser, depth: int = 0) -> object:
    """A pytree of operands in the MLIR form, as nested Python containers.

    `(%a, {x: %b})` gives `(a, {"x": b})` with unresolved operands as
    leaves; `pytree.flatten` then orders the leaves as JAX does.
    """
    if depth > pytree.MAX_DEPTH:
        parser.raise_error(errors.NESTED_TOO_DEEP.format(limit=pytree.MAX_DEPTH))
    if (operand := parser.parse_optional_unresolved_operand()) is not None:
        return operand
    if parser.parse_optional_punctuation("{") is not None:
        record: dict[str, object] = {}
        while parser.parse_optional_punctuation("}") is None:
            pos = parser.pos
            key = parser.parse_identifier(" as a record key")
            if key in record:
                parser.raise_error(errors.DUPLICATE_KEY.format(key=key), pos)
            parser.parse_punctuation(":")
            record[key] = _parse_tree(parser, depth + 1)
            if parser.parse_optional_punctuation(",") is None:
                parser.parse_punctuation("}")
                break
        return record
    closing = "]" if parser.parse_optional_punctuation("[") is not None else ")"
    if closing == ")":
        parser.parse_punctuation("(", " or a value to start a pytree")
    children: list[object] = []
    trailing = False
    while parser.parse_optional_punctuation(closing) is None:
        children.append(_parse_tree(parser, depth + 1))
        trailing = parser.parse_optional_punctuation(",") is not None
        if not trailing:
            parser.parse_punctuation(closing)
            break
    if closing == "]":
        return children
    if len(children) == 1 and not trailing:
        return children[0]
    return tuple(children)


def _print_tree(
    printer: Printer, tree: pytree.TreeDef, leaves: Iterator[SSAValue]
) -> None:
    """Print a pytree of operands, leaves in leaf order: `(%a, {x: %b})`."""
    if tree.kind == "leaf":
        printer.print_operand(next(leaves))
        return
    opening, closing = pytree.BRACKETS[tree.kind]
    printer.print_string(opening)
    for i, child in enumerate(tree.children):
        if i:
            printer.print_string(", ")
        if tree.kind == "record":
            printer.print_string(f"{tree.keys[i]}: ")
        _print_tree(printer, child, leaves)
    if tree.kind == "tuple" and len(tree.children) == 1:
        printer.print_string(",")
    printer.print_string(closing)
