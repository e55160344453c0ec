"""xDSL's generic machinery for the copy ops, made cheap enough to run on
every op of every verify: IRDL's checks of an op's shape, with the
verdict on its argument lists remembered per shape (`verify_generic`),
and operand and result accessors that skip xDSL's general dispatch
(`fast_accessors`).

Both compute what xDSL computes; neither marks a module or an op, so a
pass that changes an op gets the full checks of what it changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from xdsl.dialects.builtin import DenseArrayBase, i32
from xdsl.ir import Attribute, Operation, ParametrizedAttribute
from xdsl.irdl import IRDLOperation, OptionalDef, VariadicDef
from xdsl.irdl.constraints import (
    AnyOf,
    BaseAttr,
    EqAttrConstraint,
    RangeLengthConstraint,
    RangeOf,
    SingleOf,
    VerificationContext,
)
from xdsl.irdl.declarative_assembly_format import FormatProgram, ParsingState
from xdsl.irdl.operations import (
    AttrSizedSegments,
    BaseAttrAccessor,
    BeforeVariadicSingleAccessor,
    OpDef,
    OptAttributeDef,
    OptPropertyDef,
    VarIRConstruct,
    irdl_op_verify_arg_list,
    irdl_op_verify_regions,
    verify_variadic_size,
)
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

_operands = attrgetter("_operands")
"""The operand tuple itself: `op.operands` wraps it in a view that costs
two calls more per read (xDSL is pinned, so its private field holds)."""

_results = attrgetter("results")

MAX_ENTRIES = 1024
"""Bound of each cache here; a full one starts afresh. Programs share a
few argument shapes; one with many distinct ones (a chain of views, each
of its own type) misses, and a small bound makes it miss at every size
rather than only beyond the bound."""

_VALID_ARGUMENTS: dict[tuple, tuple[object, ...]] = {}
"""Keys of operand and result lists IRDL found valid (see
`verify_generic`), each with the types the key names by identity, which
the entry keeps alive so that no other object takes their ids."""


def forget_verdicts() -> None:
    """Start afresh, as a new process would (a test that counts the work of
    one verify wants it cold). The decode caches of arrays' bytes
    (`segment_sizes_of`, `copyir.attributes.int_values`) stay: they hold
    no verdict."""
    _VALID_ARGUMENTS.clear()
    _VALID_VALUES.clear()
    _VALID_CHECKS.clear()


def verify_generic(op: IRDLOperation) -> None:
    """xDSL's generic checks of the op's shape: what IRDL's `OpDef.verify`
    checks, in its order and with its messages.

    Its check of the operand and result lists (counts, segment sizes,
    each type against its constraint) and of the regions (their count,
    their blocks', their entry arguments') is a pure function of the op's
    class, its operand and result types, its segment sizes and its regions'
    block counts and entry argument types, when no constraint of a
    property or attribute binds a variable: a valid verdict is remembered
    under that key (types by identity: parsers and builders share type
    objects, and a type's hash costs more than its check). The
    key is computed afresh at every call, so a changed op is checked
    again. Properties and attributes are checked at every call too, a
    value found valid remembered by identity (`_verify_attributes`);
    traits every time.
    """
    op_def = op.get_irdl_definition()
    segments = _segment_options(type(op), op_def)
    if segments is None or op.successors:
        op_def.verify(op)
        return
    operands = _operands(op)
    types = [v.type for v in operands]
    types += [r.type for r in op.results]
    by_class = _checks_classes_only(type(op), op_def)
    regions = op.regions
    entry_types = (
        [t for r in regions if r.first_block for t in r.first_block.arg_types]
        if regions
        else []
    )
    sizes = [s.container(op).get(s.attribute_name) for s in segments]
    key = (
        type(op),
        len(operands),
        *(map(type, types) if by_class else map(id, types)),
        *map(id, sizes),
        *[len(r.blocks) for r in regions],
        *map(id, entry_types),
    )
    context = VerificationContext()
    if key not in _VALID_ARGUMENTS:
        irdl_op_verify_arg_list(op, op_def, VarIRConstruct.OPERAND, context)
        irdl_op_verify_arg_list(op, op_def, VarIRConstruct.RESULT, context)
        irdl_op_verify_regions(op, op_def, context)
        verify_variadic_size(op, op_def, VarIRConstruct.SUCCESSOR)
        if len(_VALID_ARGUMENTS) >= MAX_ENTRIES:
            _VALID_ARGUMENTS.clear()
        _VALID_ARGUMENTS[key] = (*types, *sizes, *entry_types)
    _verify_attributes(op, op_def, context, remember=True)
    for trait in op_def.traits:
        trait.verify(op)


_VALID_CHECKS: dict[tuple, tuple[Attribute, ...]] = {}
"""Keys of ops whose own check passed (see `remembered_check`), each with
the attributes the key names by identity, kept alive by the entry."""


def remembered_check(
    op: Operation, inputs: tuple[Attribute, ...] | None, check: Callable[[], None]
) -> None:
    """Run an op's own check, unless one of its class passed on the same
    operand count and the same `inputs`: the immutable attributes (types,
    properties) that its verdict is a pure function of, or None when it
    reads more. Keyed by identity, as `verify_generic` keys types: parsers
    and builders share attributes, and a hash walks their parameters. Only
    a pass is remembered, so every error is raised by the check itself."""
    if inputs is None:
        check()
        return
    key = (type(op), len(_operands(op)), *map(id, inputs))
    if key in _VALID_CHECKS:
        return
    check()
    if len(_VALID_CHECKS) >= MAX_ENTRIES:
        _VALID_CHECKS.clear()
    _VALID_CHECKS[key] = inputs


def arity_holds(op: IRDLOperation) -> bool:
    """Whether the op's operand and result lists have the lengths its
    definition (and its segment sizes) give, whatever their types."""
    op_def = op.get_irdl_definition()
    try:
        verify_variadic_size(op, op_def, VarIRConstruct.OPERAND)
        verify_variadic_size(op, op_def, VarIRConstruct.RESULT)
    except VerifyException:
        return False
    return True


_VALID_VALUES: dict[tuple[int, int], tuple[object, Attribute]] = {}
"""Keys (constraint, value) by identity of property and attribute values
found valid (see `_verify_attributes`), each with the two objects, which
the entry keeps alive so that no others take their ids."""


def _verify_attributes(
    op: Operation, op_def: OpDef, context: VerificationContext, remember: bool = False
) -> None:
    """The properties and attributes, as `OpDef.verify` checks them (only
    properties must all be declared: attributes may carry anything).

    With `remember` (no constraint binds a variable, so a value's verdict
    is a pure function of the constraint and the value, both immutable)
    a valid value is remembered by identity: builders and parsers share
    attributes (`copyir.attributes`), and a check walks an attribute's
    parameters where a look-up hashes two integers.
    """
    parts = (
        ("property", op_def.properties, op.properties, OptPropertyDef),
        ("attribute", op_def.attributes, op.attributes, OptAttributeDef),
    )
    for kind, defs, values, optional in parts:
        for name, attr_def in defs.items():
            if name not in values:
                if isinstance(attr_def, optional):
                    continue
                raise VerifyException(
                    f"{kind} '{name}' expected in operation '{op.name}'"
                )
            value, constr = values[name], attr_def.constr
            if not remember:
                constr.verify(value, context)
                continue
            key = (id(constr), id(value))
            if key not in _VALID_VALUES:
                constr.verify(value, context)
                if len(_VALID_VALUES) >= MAX_ENTRIES:
                    _VALID_VALUES.clear()
                _VALID_VALUES[key] = (constr, value)
        if kind == "property":
            for name in values:
                if name not in defs:
                    raise VerifyException(
                        f"property '{name}' is not defined by the operation "
                        f"'{op.name}'. Use the dictionary attribute to add "
                        "arbitrary information to the operation."
                    )


_SEGMENT_OPTIONS: dict[type, tuple[AttrSizedSegments, ...] | None] = {}


def _segment_options(cls: type, op_def: OpDef) -> tuple[AttrSizedSegments, ...] | None:
    """Where the class's segment sizes are, which its argument lists' check
    reads; None when a constraint of a property or attribute binds a
    variable, which would tie it to the argument lists, so that their check
    depends on more than they. (A variable among operands and results
    alone, `scalar.add`'s one type, depends on their types only.)"""
    if cls not in _SEGMENT_OPTIONS:
        named = (*op_def.properties.values(), *op_def.attributes.values())
        _SEGMENT_OPTIONS[cls] = (
            None
            if any(d.constr.variables() for d in named)
            else tuple(o for o in op_def.options if isinstance(o, AttrSizedSegments))
        )
    return _SEGMENT_OPTIONS[cls]


_CLASSES_ONLY: dict[type, bool] = {}


def _checks_classes_only(cls: type, op_def: OpDef) -> bool:
    """Whether every operand and result constraint of the class asks only
    for a type's class (`RefType`, `SemaphoreType | SemaphoreArrayType`,
    `IndexType`): then the argument lists' verdict depends on the types'
    classes, and views of many distinct ref types share one verdict."""
    if cls not in _CLASSES_ONLY:
        parts = (*op_def.operands, *op_def.results)
        _CLASSES_ONLY[cls] = all(_class_only(d.constr) for _, d in parts)
    return _CLASSES_ONLY[cls]


def _class_only(constraint: object) -> bool:
    if isinstance(constraint, RangeLengthConstraint):
        return _class_only(constraint.constraint)
    if isinstance(constraint, RangeOf | SingleOf):
        return _class_only(constraint.constr)
    if isinstance(constraint, AnyOf):
        return all(_class_only(c) for c in constraint.attr_constrs)
    if isinstance(constraint, EqAttrConstraint):  # a type without parameters
        attr = constraint.attr
        return isinstance(attr, ParametrizedAttribute) and not attr.parameters
    return isinstance(constraint, BaseAttr)


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


@dataclass(frozen=True)
class TypesAsWritten(FormatProgram):
    """A declarative format that takes the types as written.

    xDSL's format checks each parsed type against its constraint while
    parsing, so `%z = copy.alloc : !copy.sem` would be xDSL's message at the
    next line. Left to the verifier, as `create_typed` does for the
    hand-written formats, it is the op's documented message at the op. The
    copy ops' constraints bind no variable, so there is nothing to resolve
    here that inference needs."""

    def resolve_constraint_variables(self, state: ParsingState, op_def: OpDef):
        pass


def types_as_written(cls: type[IRDLOperation]) -> None:
    """Parse an op with an assembly format through `TypesAsWritten`."""
    op_def = cls.get_irdl_definition()
    if op_def.assembly_format is None:
        return
    program = TypesAsWritten(
        FormatProgram.from_str(op_def.assembly_format, op_def).stmts
    )

    @classmethod
    def parse(op_type: type[IRDLOperation], parser: Parser) -> IRDLOperation:
        return program.parse(parser, op_type)

    # pyright types the assignment as if it bound the classmethod it stores
    cls.parse = parse  # pyright: ignore[reportAttributeAccessIssue]
