"""What every op of the copy dialect shares: the `CopyOp` base, how messages
name values, and the checks several ops make.

Verifiers raise `CopyIRError` (a `ValueError`) with the messages of
`copyir.errors`; `passes.verify` gives them the op's location. A check that
looks through chains of views (do a DMA's ends overlap?) is a
`verify_accesses(accesses)` method rather than part of `verify_`:
`passes.verify` calls it with one `copyir.access.Accesses` for the whole
program, so that each view is folded once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

from xdsl.dialects.builtin import StringAttr
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.ir.affine import AffineExpr
from xdsl.irdl import IRDLOperation, irdl_attr_definition
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from copyir import errors
from copyir.errors import CopyIRError, Note
from copyir.index import MAX_DEPTH, constant_out_of_range, divides_by_zero, too_deep

from .generic import arity_holds, remembered_check, verify_generic
from .types import RefType, SemaphoreArrayType, SemaphoreType, describe_type

if TYPE_CHECKING:
    from copyir.access import Accesses


class DmaAction(StrEnum):
    """What a DMA op does with its copy, as Pallas' `_copy_start_or_wait`."""

    START = "start"
    WAIT = "wait"


ACTIONS = tuple(DmaAction)


@irdl_attr_definition
class DmaActionAttr(EnumAttribute[DmaAction], SpacedOpaqueSyntaxAttribute):
    """`#copy<action start>`; another word is UNKNOWN_ACTION, at the word."""

    name = "copy.action"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> DmaAction:
        return parse_word(parser, DmaAction, "a DMA action", unknown_action)


Word = TypeVar("Word", bound=StrEnum)


def unknown_action(word: str) -> str:
    return errors.UNKNOWN_ACTION.format(action=word)


def parse_word(
    parser: AttrParser, vocabulary: type[Word], what: str, error: Callable[[str], str]
) -> Word:
    """A word of a closed vocabulary; another word is its documented
    `error(word)`, located at the word."""
    start = parser.pos
    word = parser.parse_identifier(f" for {what}")
    if word not in vocabulary.__members__.values():
        parser.raise_error(error(word), start, parser.pos)
    return vocabulary(word)


ActionConstraint = DmaActionAttr | StringAttr
"""A DMA op's action property. The generic MLIR form may also spell it as a
string (`action = "start"`, as before the enum): the op's own check reads
either, so that a word that names no action is reported with the user's
word (`Unknown action: Start`) in every form."""


@functools.lru_cache(maxsize=64)
def action_attr(word: str) -> Attribute:
    """The action a word names; a word that names none stays a `StringAttr`
    for the verifier to report. Shared: one attribute per word, as every
    DMA of a program names one of two."""
    return DmaActionAttr(DmaAction(word)) if word in ACTIONS else StringAttr(word)


class CopyOp(IRDLOperation):
    """An op of the copy dialect. `check` holds its own rules; `verify_`,
    which xDSL's verify calls after its generic checks of the op's shape
    (operand, result and property kinds), runs it."""

    def check(self) -> None:
        pass

    def verify_(self) -> None:
        self.check()

    def check_inputs(self) -> tuple[Attribute, ...] | None:
        """The attributes (types, properties) whose identities, with the
        op's class and operand count, decide `check` on an op that passed
        `verify_generic`; None (the default) when `check` reads more, such
        as other ops. A passed check is remembered under them."""
        return None

    def verify_all(self) -> None:
        """xDSL's generic checks of the op's shape (`verify_generic`), then
        its own.

        Where a generic check fails (a semaphore where a ref is declared),
        the op's own check runs anyway and its documented message wins if it
        has one for the mistake: EXPECTED_REF names the user's value and
        says what it is, which IRDL's message does not. Only where the
        operand and result lists have their declared arity: a check reading
        lists of the wrong length would say something false. A check that
        cannot read the malformed op leaves the generic message.
        """
        try:
            verify_generic(self)
            remembered_check(self, self.check_inputs(), self.check)
        except VerifyException:
            if not arity_holds(self):
                raise
            try:
                self.check()
            except CopyIRError:
                raise
            except Exception:  # the op is too malformed for its own check
                pass
            raise

    def written(self) -> tuple[SSAValue, ...]:
        """The refs this op writes (or names as a DMA's destination)."""
        return ()

    def result_text(self) -> str | None:
        """How messages spell this op's result when the user named it not:
        a view's expression (`x[0:8]`), an index expression (`8 * i + 8`)."""
        return None


def parse_operands(parser: Parser) -> list[UnresolvedOperand]:
    """`%a, %b, %c`."""
    return parser.parse_comma_separated_list(
        parser.Delimiter.NONE, parser.parse_unresolved_operand
    )


AnyCopyOp = TypeVar("AnyCopyOp", bound=CopyOp)


def create_typed(
    cls: type[AnyCopyOp],
    parser: Parser,
    operands: Sequence[UnresolvedOperand],
    properties: Mapping[str, Attribute],
    result_types: Sequence[Attribute] = (),
) -> AnyCopyOp:
    """The op, from the rest of `%a, %b <options> attr-dict : !ta, !tb`.

    The types are taken as written and only the verifier checks them
    against the declaration, so that a program with a semaphore where a ref
    belongs reaches its documented message through the MLIR form (a
    declarative format would reject it while parsing).
    """
    attributes = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    pos = parser.pos
    types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    return cls.create(
        operands=parser.resolve_operands(operands, types, pos),
        properties=properties,
        attributes=attributes,
        result_types=result_types,
    )


def print_attributes_and_types(printer: Printer, op: CopyOp) -> None:
    """` attr-dict : !ta, !tb`, one type per operand."""
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    printer.print_list([o.type for o in op.operands], printer.print_attribute)


def set_name(value: SSAValue, name: str | None) -> None:
    """Name a value exactly as the user did.

    xDSL's `name_hint` setter drops a trailing `_<digits>`, which would turn
    a parameter `out_1` into `out`; parameter names bind inputs and outputs,
    so copyir keeps them whole.
    """
    value._name = name


def describe(value: SSAValue) -> str:
    """A value as a user wrote it: its name, the view expression, or the
    index expression (`8 * i + 8`)."""
    if value.name_hint is not None:
        return value.name_hint
    owner = value.owner
    text = owner.result_text() if isinstance(owner, CopyOp) else None
    return text or "an unnamed value"


def expect_ref(op: str, role: str, value: SSAValue) -> RefType:
    """The value's RefType, or EXPECTED_REF naming what it is instead."""
    if isinstance(value.type, RefType):
        return value.type
    raise CopyIRError(
        errors.EXPECTED_REF.format(
            op=op, role=role, name=describe(value), type=describe_type(value.type)
        )
    )


def check_store(type: RefType) -> None:
    """Where a computation, opaque or not, may store: VMEM arrays and SMEM
    scalars, with Pallas' messages."""
    if type.space_name == "hbm":
        raise CopyIRError(errors.HBM_STORE)
    if type.space_name == "smem" and type.get_shape():
        raise CopyIRError(errors.SMEM_STORE)
    if type.space_name == "vmem" and not type.get_shape():
        raise CopyIRError(errors.VMEM_SCALAR_STORE)


def expect_semaphore(op: str, role: str, value: SSAValue) -> None:
    if isinstance(value.type, SemaphoreType):
        return
    template = (
        errors.UNINDEXED_SEMAPHORE_ARRAY
        if isinstance(value.type, SemaphoreArrayType)
        else errors.EXPECTED_SEMAPHORE
    )
    raise CopyIRError(
        template.format(
            op=op, role=role, name=describe(value), type=describe_type(value.type)
        )
    )


def check_action(action: str) -> DmaAction:
    """The action a word names, or UNKNOWN_ACTION quoting the word."""
    if action not in ACTIONS:
        raise CopyIRError(unknown_action(action))
    return DmaAction(action)


def check_dma_types(src: RefType, dst: RefType) -> None:
    """Mosaic's checks, messages verbatim: dtype first, then shape."""
    if src.element_type != dst.element_type:
        raise CopyIRError(errors.DTYPE_MISMATCH)
    if src.get_shape() != dst.get_shape():
        raise CopyIRError(errors.SHAPE_MISMATCH)


def types_note(src: SSAValue, dst: SSAValue) -> str:
    """A note naming both ends of a copy with their types."""
    return errors.TYPES_NOTE.format(
        src=describe(src),
        src_type=describe_type(src.type),
        dst=describe(dst),
        dst_type=describe_type(dst.type),
    )


def expect_descriptor(op: str, src: SSAValue, dst: SSAValue, sem: SSAValue) -> None:
    """A DMA's (src, dst, sem): two refs and a semaphore."""
    expect_ref(op, "src", src)
    expect_ref(op, "dst", dst)
    expect_semaphore(op, "sem", sem)


def check_ends(src: SSAValue, dst: SSAValue) -> None:
    """Two refs (as `expect_descriptor` found) of one dtype and shape; a
    mismatch carries a note naming both ends with their types."""
    try:
        check_dma_types(cast(RefType, src.type), cast(RefType, dst.type))
    except CopyIRError as err:
        raise CopyIRError(err.message, notes=(Note(types_note(src, dst)),)) from None


def check_start_options(is_start: bool, add: bool, priority: int | None) -> None:
    """A wait takes neither `add` nor a priority; a priority is 0 or 1."""
    if not is_start:
        for option, given in (("add", add), ("priority", priority is not None)):
            if given:
                raise CopyIRError(errors.WAIT_OPTIONS.format(option=option))
    if priority not in (None, 0, 1):
        raise CopyIRError(errors.BAD_PRIORITY.format(priority=priority))


def same_ref_type(src: Attribute, dst: Attribute) -> bool:
    """Both refs, of one dtype and shape: what a DMA's two ends need."""
    return (
        isinstance(src, RefType)
        and isinstance(dst, RefType)
        and src.element_type == dst.element_type
        and src.shape == dst.shape
    )


def check_no_overlap(src: SSAValue, dst: SSAValue, accesses: Accesses) -> None:
    if accesses.overlap(src, dst):
        raise CopyIRError(
            errors.DMA_OVERLAP.format(src=describe(src), dst=describe(dst))
        )


def check_evaluable(exprs: Sequence[AffineExpr]) -> None:
    """Index expressions have a value at every point: they nest no deeper
    than `MAX_DEPTH`, their constants fit in 64 bits and none divides by
    zero."""
    if too_deep(exprs) is not None:
        raise CopyIRError(errors.INDEX_TOO_DEEP.format(limit=MAX_DEPTH))
    if (value := constant_out_of_range(exprs)) is not None:
        raise CopyIRError(errors.INT_RANGE.format(value=value))
    if divides_by_zero(exprs):
        raise CopyIRError(errors.DIVIDES_BY_ZERO)
