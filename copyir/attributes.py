"""Shared xDSL attributes: built once, looked up after.

Attributes are immutable, and building one costs more than looking it up;
large programs repeat a few, so these caches make parsing and lowering
cheaper.
"""

from __future__ import annotations

import functools

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    i32,
    i64,
)
from xdsl.ir import Attribute
from xdsl.parser import AttrParser

from copyir import errors


@functools.lru_cache(maxsize=4096)
def i64_array(values: tuple[int, ...]) -> DenseArrayBase[I64]:
    """A shared `array<i64: ...>` attribute."""
    return DenseArrayBase.from_list(i64, values)


@functools.lru_cache(maxsize=256)
def segment_sizes(sizes: tuple[int, ...]) -> DenseArrayBase:
    """`operandSegmentSizes` for ops with variadic operands built by `create`."""
    return DenseArrayBase.from_list(i32, sizes)


_DECODED: dict[tuple[bytes, int], tuple[tuple[int, ...], Attribute]] = {}
"""Decoded arrays by their bytes and their element type's id, each with
that type, which the entry keeps alive so that no other object takes its
id. Not by the attribute: its hash walks its parameters (the element type's
too) at every call, which costs more than looking its bytes up."""


def int_values(array: DenseArrayBase[IntegerType]) -> tuple[int, ...]:
    """The integers of an array attribute, decoded once per distinct array."""
    key = (array.data.data, id(array.elt_type))
    known = _DECODED.get(key)
    if known is not None:
        return known[0]
    values = tuple(array.get_values())
    if len(_DECODED) >= 4096:  # a full cache starts afresh
        _DECODED.clear()
    _DECODED[key] = (values, array.elt_type)
    return values


@functools.lru_cache(maxsize=4096)
def int_attr(value: int) -> IntAttr:
    """A shared `IntAttr` (a location's column: statements share a few)."""
    return IntAttr(value)


@functools.lru_cache(maxsize=65536)
def i64_attr(value: int) -> IntegerAttr:
    """A shared `IntegerAttr` of type i64."""
    return IntegerAttr(value, i64)


@functools.lru_cache(maxsize=4096)
def string_attr(value: str) -> StringAttr:
    """A shared `StringAttr`."""
    return StringAttr(value)


def parse_i64(parser: AttrParser) -> int:
    """An integer that fits in 64 bits, as every integer property and stream
    field must: a larger one is an error at its text, not a wrapped value."""
    start = parser.pos
    value = parser.parse_integer(allow_negative=True)
    if not -(2**63) <= value < 2**63:
        parser.raise_error(errors.INT_RANGE.format(value=value), start, parser.pos)
    return value
