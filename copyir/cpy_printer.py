"""Print copy-dialect IR in the authoring syntax (`.cpy`).

The printer writes what the parser reads back into the same ops: a view
used once, right before its user and at its user's location, is written
inline (`copy_start x[0:32, :] -> ...`) exactly when the parser would
rebuild it in the same place; any other view gets a statement of its own.
With `debuginfo`, every statement ends in `loc("file":line:col)` so that
`parse(print(m))` keeps the locations too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue

from copyir.dialects.copy import (
    AllocOp,
    BufferedCopyOp,
    BufferedRefOp,
    BufferedRefType,
    DmaOp,
    KernelOp,
    RefType,
    SemaphoreArrayType,
    SemaphoreOp,
    SemIndexOp,
    SyncCopyOp,
    ViewOp,
    describe_type,
)
from copyir.dialects.dma import ProgramOp
from copyir.errors import CopyIRError
from copyir.locations import detail_of

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KEYWORDS = frozenset(
    [
        "kernel",
        "alloc",
        "semaphore",
        "buffered_ref",
        "copy_start",
        "copy_wait",
        "dma",
        "sync_copy",
        "buffered_copy",
        "loc",
        "None",
        "Blocked",
        "Element",
    ]
)
_INLINE = (ViewOp, SemIndexOp)


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
        ops = list(kernel.body.block.ops)
        self.assign_names(kernel, ops)
        self.inline = _inline_views(ops)
        params = ", ".join(
            f"{self.names[arg]}: {describe_type(arg.type)}{self.loc(arg.location)}"
            for arg in kernel.params
        )
        lines = [f"kernel {kernel.kernel_name}({params}){self.loc(kernel.location)} {{"]
        if "param_addresses" in kernel.attributes:
            lines.append(f"  # {_layout_note(kernel)}")
        for op in ops:
            if op not in self.inline:
                note = _address_note(op)
                lines.append(f"  {self.statement(op)}{self.loc(op.location)}{note}")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def loc(self, location: Attribute) -> str:
        return location_suffix(location) if self.debuginfo else ""

    def assign_names(self, kernel: KernelOp, ops: Sequence[Operation]) -> None:
        """Keep each valid, unique name; make up fresh ones for the rest."""
        values = list(kernel.params) + [r for op in ops for r in op.results]
        taken = {v.name_hint for v in values if v.name_hint}
        used: set[str] = set()
        counter = 0
        for value in values:
            hint = value.name_hint
            if (
                hint
                and _NAME.fullmatch(hint)
                and hint not in KEYWORDS
                and hint not in used
            ):
                name = hint
            else:
                while f"v{counter}" in taken or f"v{counter}" in used:
                    counter += 1
                name = f"v{counter}"
            used.add(name)
            self.names[value] = name

    def operand(self, value: SSAValue) -> str:
        """A value's name, followed by the subscripts of inline views."""
        suffixes = []
        while value.owner in self.inline:
            suffixes.append(_subscripts(value.owner))
            value = value.owner.source
        return self.names[value] + "".join(reversed(suffixes))

    def statement(self, op: Operation) -> str:
        if isinstance(op, _INLINE):
            return (
                f"{self.names[op.result]} = {self.operand(op.source)}{_subscripts(op)}"
            )
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
            return f"{self.names[op.result]} = {buffered_ref_text(op.result.type)}"
        if isinstance(op, DmaOp):
            return self.dma(op)
        if isinstance(op, SyncCopyOp):
            return self.sync_copy(op)
        if isinstance(op, BufferedCopyOp):
            src = self.names[op.src] + _indices(op.src_indices)
            dst = self.names[op.dst] + _indices(op.dst_indices)
            slot = f", slot={op.slot_value}" if op.slot is not None else ""
            return f"buffered_copy {src} -> {dst}{slot}"
        return f"# {op.name} has no authoring syntax"

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
            escaped = action.replace("\\", "\\\\").replace('"', '\\"')
            head = f'dma "{escaped}"'
        src, dst, sem = (self.operand(v) for v in (op.src, op.dst, op.sem))
        options = ", add" if op.add is not None else ""
        if op.priority is not None:
            options += f", priority={op.priority_value}"
        return f"{head} {src} -> {dst}, {sem}{options}"


def _address_note(op: Operation) -> str:
    """A comment on what the passes decided: where a buffer lives, which id a
    semaphore has, which pytree leaf or block a DMA came from."""
    if "address" in op.attributes and isinstance(op, AllocOp):
        space = op.result.type.space_name
        return f"  # {space}+{op.attributes['address'].value.data}"
    if "sem_id" in op.attributes:
        return f"  # sem {op.attributes['sem_id'].value.data}"
    if detail := detail_of(op.location):
        return f"  # {detail}"
    return ""


def _layout_note(kernel: KernelOp) -> str:
    addresses = kernel.attributes["param_addresses"].get_values()
    places = ", ".join(
        f"{name} at hbm+{address}"
        for name, address in zip(kernel.param_names, addresses, strict=False)
    )
    target = kernel.attributes.get("target")
    return f"target {target.data if target else '?'}: {places}"


def buffered_ref_text(type: BufferedRefType) -> str:
    array = type.array_type.describe().removesuffix(" @hbm")
    dims = [b.describe() for b in type.block_dims]
    block = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
    text = f"buffered_ref {array}, block={block}, buffers={type.buffers.data}"
    if type.space.data != "vmem":
        text += f", space={type.space.data}"
    return text


def _subscripts(op: ViewOp | SemIndexOp) -> str:
    """`[0:32, :]`: a view's subscripts, `:` for a whole dimension."""
    if isinstance(op, SemIndexOp):
        return op.subscripts_text()
    shape = op.source.type.get_shape() if isinstance(op.source.type, RefType) else ()
    parts = []
    for dim, (offset, size, dropped) in enumerate(op.subscripts()):
        if dropped:
            parts.append(str(offset))
        elif dim < len(shape) and offset == 0 and size == shape[dim]:
            parts.append(":")
        else:
            parts.append(f"{offset}:{offset + size}")
    return f"[{', '.join(parts)}]"


def _indices(attr) -> str:
    if attr is None:
        return ""
    return f"[{', '.join(str(i) for i in attr.get_values())}]"


def _inline_views(ops: Sequence[Operation]) -> set[Operation]:
    """The views that the parser would rebuild, in place, from inline text."""
    inline: set[Operation] = set()
    for i, op in enumerate(ops):
        if isinstance(op, (_INLINE, BufferedCopyOp)):
            continue
        expected = [v for operand in op.operands for v in _chain(operand, op)]
        if expected and list(ops[i - len(expected) : i]) == expected:
            inline.update(expected)
    return inline


def _chain(value: SSAValue, user: Operation) -> list[Operation]:
    """The views the parser emits for one inline operand, in emission order."""
    chain = []
    while (
        isinstance(value.owner, _INLINE)
        and value.name_hint is None
        and value.has_one_use()
        and value.owner.location == user.location
    ):
        chain.append(value.owner)
        value = value.owner.source
    return chain[::-1]
