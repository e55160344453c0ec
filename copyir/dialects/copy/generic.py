"""xDSL's generic machinery for the copy ops, made cheap enough to run on
every op of every verify: IRDL's checks of an op's shape, remembered per
shape (`verify_generic`), and operand and result accessors that skip
xDSL's general dispatch (`fast_accessors`).

Both compute what xDSL computes; neither marks a module or an op, so a
pass that changes an op gets the full checks of what it changed.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from xdsl.dialects.builtin import DenseArrayBase, i32
from xdsl.ir import Attribute, Operation
from xdsl.irdl import IRDLOperation, OptionalDef, VariadicDef
from xdsl.irdl.operations import BaseAttrAccessor, BeforeVariadicSingleAccessor

MAX_ENTRIES = 4096
"""Bound of each cache here; a full one starts afresh."""

_VALID_SHAPES: dict[tuple, tuple[Attribute, ...]] = {}
"""Op shapes IRDL found valid (see `verify_generic`), each with the types
its key names by identity, which the entry keeps alive so that no other
object takes their ids."""

_TRIALS: dict[type, list[int]] = {}
"""Per op class, [ops, hits] since its last trial: a class whose ops
rarely repeat a shape (views of distinct offsets) is not remembered while
less than half its lookups hit, since its keys would cost more than they
save; every `RETRY_OPS` ops it gets a fresh trial of `TRIAL_OPS`."""

TRIAL_OPS = 256
RETRY_OPS = 8192


def verify_generic(op: IRDLOperation) -> None:
    """xDSL's generic checks of the op's shape (IRDL's `OpDef.verify`).

    For an op without regions or successors they are a pure function of
    its class, operand and result types, properties and attributes (all
    immutable): a valid verdict is remembered under that key, which is
    computed afresh at every call, so a changed op is checked again. The
    key names the types by identity (parsers and builders share type
    objects, and a type's hash costs more than IRDL's check of it), the
    properties and attributes by value. The op's traits, which may look at
    where it is, run every time.
    """
    op_def = op.get_irdl_definition()
    if op.regions or op.successors or not _worth_remembering(type(op)):
        op_def.verify(op)
        return
    types = (*op.operand_types, *op.result_types)
    key = (
        type(op),
        len(op.operands),
        *map(id, types),
        *op.properties.items(),
        None,  # properties end, attributes begin
        *op.attributes.items(),
    )
    if key in _VALID_SHAPES:
        _TRIALS[type(op)][1] += 1
        for trait in op_def.traits:
            trait.verify(op)
        return
    op_def.verify(op)
    if len(_VALID_SHAPES) >= MAX_ENTRIES:
        _VALID_SHAPES.clear()
    _VALID_SHAPES[key] = types


def _worth_remembering(cls: type) -> bool:
    """Count the op; False while its class's trial says its shapes rarely
    repeat."""
    counts = _TRIALS.setdefault(cls, [0, 0])
    ops, hits = counts
    if ops >= RETRY_OPS:
        counts[:] = [0, 0]
    counts[0] += 1
    return ops < TRIAL_OPS or 2 * hits >= ops


_SEGMENT_SIZES: dict[bytes, tuple[int, ...]] = {}
"""`operandSegmentSizes` decoded, by the array's bytes."""


def segment_sizes_of(op: Operation) -> tuple[int, ...] | None:
    """The op's `operandSegmentSizes` as integers, decoded once per distinct
    array; None when it is not an i32 array (xDSL's accessors then say why)."""
    attr = op.properties.get("operandSegmentSizes")
    if not isinstance(attr, DenseArrayBase) or attr.elt_type != i32:
        return None
    raw = attr.data.data
    sizes = _SEGMENT_SIZES.get(raw)
    if sizes is None:
        if len(_SEGMENT_SIZES) >= MAX_ENTRIES:
            _SEGMENT_SIZES.clear()
        sizes = _SEGMENT_SIZES[raw] = attr.get_values()
    return sizes


class SegmentAccessor:
    """An operand accessor of an op with `AttrSizedOperandSegments` that
    reads the segment sizes through `segment_sizes_of`, where xDSL's
    decodes them at every read (an op's methods read its operands often).
    It returns what xDSL's accessor returns; a malformed op is left to it."""

    def __init__(self, xdsl: BaseAttrAccessor, kind: str, count: int):
        self.xdsl, self.kind, self.count = xdsl, kind, count

    def __get__(self, op: Operation | None, cls: type | None = None) -> Any:
        if op is None:
            return self
        sizes = segment_sizes_of(op)
        if sizes is None or len(sizes) != self.count:
            return self.xdsl.__get__(op, cls)
        index = self.xdsl.idx
        start = sum(sizes[:index])
        operands = _operands(op)
        if self.kind == "single":
            return operands[start]
        if self.kind == "optional":
            return operands[start] if sizes[index] else None
        return operands[start : start + sizes[index]]


class PositionAccessor:
    """An accessor of an operand or result at a fixed position (one before
    any variadic): xDSL's `BeforeVariadicSingleAccessor` without its
    dispatch on the kind of construct (`xdsl`, kept, is xDSL's own)."""

    def __init__(
        self, xdsl: BeforeVariadicSingleAccessor, values: Callable[[Operation], Any]
    ):
        self.xdsl, self.values, self.index = xdsl, values, xdsl.idx

    def __get__(self, op: Operation | None, cls: type | None = None) -> Any:
        if op is None:
            return self
        return self.values(op)[self.index]


_operands = attrgetter("_operands")
"""The operand tuple itself: `op.operands` wraps it in a view that costs
two calls more per read (xDSL is pinned, so its private field holds)."""

_results = attrgetter("results")


def fast_accessors(cls: type[IRDLOperation]) -> None:
    """Give an `irdl_op_definition`'s operands and results the accessors
    above where xDSL's are slow; the others stay."""
    op_def = cls.get_irdl_definition()
    for values, defs in ((_operands, op_def.operands), (_results, op_def.results)):
        for name, definition in defs:
            xdsl = vars(cls).get(name)
            if isinstance(xdsl, BeforeVariadicSingleAccessor):
                setattr(cls, name, PositionAccessor(xdsl, values))
            elif isinstance(xdsl, BaseAttrAccessor) and values is _operands:
                kind = (
                    "optional"
                    if isinstance(definition, OptionalDef)
                    else "variadic"
                    if isinstance(definition, VariadicDef)
                    else "single"
                )
                setattr(cls, name, SegmentAccessor(xdsl, kind, len(defs)))
