"""`.cpy` statements that move data: DMAs, copies of pytrees, buffered
copies, descriptors' methods, invalidations."""

from __future__ import annotations

import re
from typing import cast

from lark import Token, Tree
from lark.tree import Branch
from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import SSAValue

from copyir import errors, pytree
from copyir.attributes import segment_sizes
from copyir.cpy.operands import subscript_items
from copyir.cpy.options import OptionReader
from copyir.cpy.scope import children, position, unquote
from copyir.dialects.copy import (
    AsyncDmaOp,
    BufferedCopyOp,
    DescriptorType,
    DmaOp,
    InvalidateOp,
    SyncCopyOp,
    action_attr,
    describe_type,
)


class TransferBuilder(OptionReader):
    """DMAs, sync and buffered copies, descriptors' starts and waits."""

    def dma_stmt(self, tree: Tree) -> None:
        kind, src, dst, sem, *options = children(tree)
        head = kind.children[0]
        label = "dma" if head == "dma" else str(head)
        options = self.options(options[:-1], label, {"add": "flag", "priority": "int"})
        if head == "dma":
            action = kind.children[1]
            action = unquote(action) if action.type == "STRING" else str(action)
        else:
            action = "start" if head == "copy_start" else "wait"
        operands = [self.operand(src), self.operand(dst), self.operand(sem)]
        properties = DmaOp.option_properties(
            action, "add" in options, options.get("priority", 0)
        )
        self.emit(DmaOp, operands, (), properties)

    def dma_line(self, tree: Tree) -> None:
        """A DMA_LINE token: the `dma_stmt` it holds, its parts located."""
        (line,) = children(tree)
        match = _DMA_LINE.match(line)
        assert match is not None  # the grammar's DMA_LINE is this pattern
        kind = Tree("dma_kind", [_part(line, match, 1, "DMA_KIND")])
        operands = [
            Tree(
                "operand",
                [
                    _part(line, match, group, type)
                    for group, type in ((k, "NAME"), (k + 1, "SUBSCRIPTS"))
                    if match.group(group) is not None
                ],
            )
            for k in (2, 4, 6)
        ]
        # None: the absent options, as lark's maybe_placeholders leaves them
        # (which its types do not allow for)
        self.dma_stmt(Tree("dma_stmt", [kind, *operands, None]))  # pyright: ignore[reportArgumentType]

    def sync_copy(self, tree: Tree) -> None:
        _, src, dst, *options = children(tree)
        options = self.options(options[:-1], "sync_copy", {"add": "flag"})
        src_tree, srcs = pytree.flatten(self.tree(src, 0))
        dst_tree, dsts = pytree.flatten(self.tree(dst, 0))
        properties = SyncCopyOp.tree_properties(src_tree, dst_tree, "add" in options)
        properties["operandSegmentSizes"] = segment_sizes((len(srcs), len(dsts)))
        self.emit(SyncCopyOp, [*srcs, *dsts], (), properties)

    def buffered_copy(self, tree: Tree) -> None:
        """`buffered_copy [start|wait] src -> dst[, sem], slot=s`: the block
        indices' values first, then the semaphore's, then the slot's."""
        _, action, src, dst, *items = children(tree)
        items = items[:-1]
        if action is not None:
            word = action.children[0]
            action = unquote(word) if word.type == "STRING" else str(word)
        dynamic: list[SSAValue] = []
        src_value, src_indices = self.bref_side(src, dynamic)
        dst_value, dst_indices = self.bref_side(dst, dynamic)
        positional = [item for item in items if item.data == "operand"]
        if len(positional) > 1 or (positional and positional[0] is not items[0]):
            extra = positional[1] if len(positional) > 1 else positional[0]
            raise self.error(
                extra, errors.WINDOW_EXTRA_ITEM.format(expr=self.source(extra))
            )
        if action is not None and not positional:
            raise self.error(tree, errors.WINDOW_NO_SEMAPHORE.format(action=action))
        sem = self.operand(positional[0]) if positional else None
        options = [item for item in items if item.data == "option"]
        slot = self.options(options, "buffered_copy", {"slot": "index"}).get("slot", 0)
        properties = BufferedCopyOp.index_properties(
            src_indices, dst_indices, slot if isinstance(slot, int) else 0
        )
        if action is not None:
            properties["action"] = action_attr(action)
        dynamic_slot = [slot] if isinstance(slot, SSAValue) else []
        properties["operandSegmentSizes"] = BufferedCopyOp.segments(
            len(dynamic), bool(dynamic_slot), sem is not None
        )
        operands = [src_value, dst_value, *dynamic, *dynamic_slot]
        self.emit(BufferedCopyOp, [*operands, *([sem] if sem else [])], (), properties)

    def bref_side(
        self, tree: Tree, dynamic: list[SSAValue]
    ) -> tuple[SSAValue, list[int] | None]:
        """A side of a buffered_copy: a name, and block indices (DYNAMIC for
        an index value, which joins `dynamic`)."""
        name, indices = children(tree)
        value = self.lookup(name)
        if indices is None:
            return value, None
        items = subscript_items(indices)
        if any(kind != "index" for kind, _, _ in items):
            raise self.error(
                indices,
                f"Block indices must be integers: {name}{self.items_text(items)}",
            )
        return value, [
            self.dynamic_part(parts[0], at, dynamic) for _, parts, at in items
        ]

    def invalidate(self, tree: Tree) -> None:
        """`invalidate w` (`stale`): the ref's memory is unwritten again."""
        _, target, stale, _ = children(tree)
        properties = {"stale": UnitAttr()} if stale is not None else {}
        self.emit(InvalidateOp, [self.operand(target)], properties=properties)

    def method_call(self, tree: Tree) -> None:
        """`c.start(add, priority=1)`, `c.wait()`: the method is the action,
        checked by the verifier like every action."""
        name, method, *options = children(tree)
        options = [o for o in options[:-1] if o is not None]
        call = f"{name}.{method}()"
        value = self.lookup(name)
        if not isinstance(value.type, DescriptorType):
            raise self.error(
                name,
                errors.NOT_A_DESCRIPTOR.format(
                    call=call, name=name, type=describe_type(value.type)
                ),
            )
        values = self.options(options, call, {"add": "flag", "priority": "int"})
        properties = DmaOp.option_properties(
            str(method), "add" in values, values.get("priority", 0)
        )
        self.emit(AsyncDmaOp, [value], (), properties)


_DMA_LINE = re.compile(
    r"(copy_start|copy_wait)\s+(\w+)(\[[^]]*\])?\s*->\s*(\w+)(\[[^]]*\])?"
    r"\s*,\s*(\w+)(\[[^]]*\])?"
)
"""A DMA_LINE token's parts: kind, then a name and subscripts per operand."""


def _part(line: Token, match: re.Match, group: int, kind: str) -> Branch[Token]:
    """A part of a one-line token as the token it would have been."""
    start, end = match.span(group)
    row, column = position(line)
    at = cast(int, line.start_pos)  # the lexer's tokens have their positions
    return Token(
        kind,
        match.group(group),
        at + start,
        row,
        column + start,
        row,
        column + end,
        at + end,
    )
