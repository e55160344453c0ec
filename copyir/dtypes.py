"""Element types: authoring names, xDSL types and numpy dtypes side by side.

The authoring syntax prints the short name (`f32`); the long numpy-style
names (`float32`) are accepted as aliases. `bool` is `i1` in the IR; the
integer types are signless (`i32`) or unsigned (`ui32`) as in MLIR.

bfloat16's numpy dtype comes from `ml_dtypes`, whose import costs most of a
short command's start-up; it is loaded the first time a bfloat16 array is
made (`DType.numpy`), never for parsing or verifying.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute


@dataclass(frozen=True)
class DType:
    """One element type of copyir."""

    name: str
    alias: str
    ir: Attribute
    itemsize: int

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype (bfloat16 loads `ml_dtypes` on first use)."""
        return numpy_dtype(self.alias)


@functools.cache
def numpy_dtype(alias: str) -> np.dtype:
    """The numpy dtype of a copyir dtype's long name, such as `float32`."""
    if alias == "bfloat16":
        return bfloat16()
    return np.dtype(np.bool_ if alias == "bool_" else alias)


@functools.cache
def bfloat16() -> np.dtype:
    """ml_dtypes' bfloat16, imported on first use."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def _int(width: int, signed: bool = True) -> IntegerType:
    sign = Signedness.SIGNLESS if signed else Signedness.UNSIGNED
    return IntegerType(width, sign)


DTYPES: tuple[DType, ...] = (
    DType("bool", "bool_", _int(1), 1),
    DType("i8", "int8", _int(8), 1),
    DType("i16", "int16", _int(16), 2),
    DType("i32", "int32", _int(32), 4),
    DType("i64", "int64", _int(64), 8),
    DType("u8", "uint8", _int(8, False), 1),
    DType("u16", "uint16", _int(16, False), 2),
    DType("u32", "uint32", _int(32, False), 4),
    DType("f16", "float16", Float16Type(), 2),
    DType("f32", "float32", Float32Type(), 4),
    DType("f64", "float64", Float64Type(), 8),
    DType("bf16", "bfloat16", BFloat16Type(), 2),
)

BY_NAME: dict[str, DType] = {d.name: d for d in DTYPES} | {d.alias: d for d in DTYPES}
BY_IR: dict[Attribute, DType] = {d.ir: d for d in DTYPES}
KNOWN_NAMES = ", ".join(d.name for d in DTYPES)
