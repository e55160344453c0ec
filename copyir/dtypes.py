"""Element types: authoring names, xDSL types and numpy dtypes side by side.

The authoring syntax prints the short name (`f32`); the long numpy-style
names (`float32`) are accepted as aliases. `bool` is `i1` in the IR; the
integer types are signless (`i32`) or unsigned (`ui32`) as in MLIR.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
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
    numpy: np.dtype

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize


def _int(width: int, signed: bool = True) -> IntegerType:
    sign = Signedness.SIGNLESS if signed else Signedness.UNSIGNED
    return IntegerType(width, sign)


DTYPES: tuple[DType, ...] = (
    DType("bool", "bool_", _int(1), np.dtype(np.bool_)),
    DType("i8", "int8", _int(8), np.dtype(np.int8)),
    DType("i16", "int16", _int(16), np.dtype(np.int16)),
    DType("i32", "int32", _int(32), np.dtype(np.int32)),
    DType("i64", "int64", _int(64), np.dtype(np.int64)),
    DType("u8", "uint8", _int(8, False), np.dtype(np.uint8)),
    DType("u16", "uint16", _int(16, False), np.dtype(np.uint16)),
    DType("u32", "uint32", _int(32, False), np.dtype(np.uint32)),
    DType("f16", "float16", Float16Type(), np.dtype(np.float16)),
    DType("f32", "float32", Float32Type(), np.dtype(np.float32)),
    DType("f64", "float64", Float64Type(), np.dtype(np.float64)),
    DType("bf16", "bfloat16", BFloat16Type(), np.dtype(ml_dtypes.bfloat16)),
)

BY_NAME: dict[str, DType] = {d.name: d for d in DTYPES} | {d.alias: d for d in DTYPES}
BY_IR: dict[Attribute, DType] = {d.ir: d for d in DTYPES}
KNOWN_NAMES = ", ".join(d.name for d in DTYPES)
