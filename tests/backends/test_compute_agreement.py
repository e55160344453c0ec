"""A computation's region gives the same bits on both paths: interpreted op
by op on the reference path (one `@impl` per scalar op) and, lowered to the
stream's prefix form, evaluated vectorised by the stream executor; and both
are what numpy gives one ufunc at a time in the dtype.

Regions are generated as programs of scalar ops over any copyir dtype, values
used any number of times (the prefix form writes shared values out), with
every operation and literal the dtype rules allow."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from copyir.backends.reference import run_reference
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region

import copyir
from copyir import pytree
from copyir.dialects import scalar
from copyir.dialects.copy import AllocOp, ComputeOp, KernelOp, RefType, SyncCopyOp
from copyir.dtypes import BY_NAME, DType
from copyir.errors import CopyIRError

SHAPE = (4, 16)
DTYPES = ["f32", "f16", "bf16", "f64", "i8", "i32", "u8", "u32", "bool"]
LITERALS = ["0", "1", "2", "-3", "7", "200", "0.5", "-1.5", "1e-3", "nan", "inf"]
NUMPY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "max": np.maximum,
    "min": np.minimum,
    "neg": np.negative,
}


def allowed(op: type[scalar.ScalarOp], dtype: DType) -> bool:
    try:
        op.check_dtype(dtype)
    except CopyIRError:
        return False
    return True


def literal_fits(text: str, dtype: DType) -> bool:
    try:
        scalar.ConstantOp.check_literal(text, dtype)
    except CopyIRError:
        return False
    return True


@st.composite
def regions(draw) -> tuple[str, int, list[tuple]]:
    """A dtype, an input count and a program: each step a literal or an
    operation on earlier values (inputs first), the last step yielded."""
    dtype = BY_NAME[draw(st.sampled_from(DTYPES))]
    inputs = draw(st.integers(1, 3))
    words = [w for w, op in scalar.OPERATIONS.items() if allowed(op, dtype)]
    literals = [t for t in LITERALS if literal_fits(t, dtype)]
    steps: list[tuple] = []
    for _ in range(draw(st.integers(1, 8))):
        values = inputs + len(steps)
        if draw(st.integers(0, 4)) == 0:
            steps.append(("constant", draw(st.sampled_from(literals))))
            continue
        word = draw(st.sampled_from(words))
        arity = 1 if word == "neg" else 2
        steps.append((word, *(draw(st.integers(0, values - 1)) for _ in range(arity))))
    return dtype.name, inputs, steps


def region_of(dtype: DType, inputs: int, steps: list[tuple]) -> Region:
    block = Block(arg_types=[dtype.ir] * inputs)
    values = list(block.args)
    for word, *args in steps:
        if word == "constant":
            op = scalar.ConstantOp(args[0], dtype.ir)
        else:
            op = scalar.OPERATIONS[word](*(values[k] for k in args))
        block.add_op(op)
        values.append(op.result)
    block.add_op(scalar.YieldOp(values[-1]))
    return Region(block)


def program(dtype: DType, inputs: int, body: Region) -> ModuleOp:
    """y = body(x0, ..), each input copied into VMEM first."""
    hbm, vmem = RefType(SHAPE, dtype.ir, "hbm"), RefType(SHAPE, dtype.ir, "vmem")
    leaf = pytree.parse_spec("*")
    params = [(f"x{k}", hbm) for k in range(inputs)] + [("y", hbm)]
    kernel = KernelOp("k", params)
    *xs, y = kernel.params
    windows = [AllocOp(vmem, f"v{k}") for k in range(inputs)]
    out = AllocOp(vmem, "out")
    kernel.body.block.add_ops([*windows, out])
    for x, window in zip(xs, windows, strict=True):
        kernel.body.block.add_op(SyncCopyOp(leaf, [x], leaf, [window.result]))
    kernel.body.block.add_ops(
        [
            ComputeOp(out.result, body, [w.result for w in windows]),
            SyncCopyOp(leaf, [out.result], leaf, [y]),
        ]
    )
    return ModuleOp([kernel])


def values(dtype: DType, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.name == "bool":
        return rng.integers(0, 2, SHAPE).astype(np.bool_)
    if dtype.name.startswith(("i", "u")):
        info = np.iinfo(dtype.numpy)
        return rng.integers(info.min, info.max, SHAPE, endpoint=True).astype(
            dtype.numpy
        )
    x = rng.standard_normal(SHAPE) * 4
    x.flat[:3] = [np.nan, np.inf, -0.0]
    return x.astype(dtype.numpy)


def by_numpy(dtype: DType, inputs: list[np.ndarray], steps: list[tuple]) -> np.ndarray:
    """The steps one ufunc at a time on arrays of the dtype, as written."""
    found = list(inputs)
    for word, *args in steps:
        if word == "constant":
            text = args[0]
            kind = int if np.issubdtype(dtype.numpy, np.integer) else float
            found.append(np.array(kind(text), dtype.numpy))
        else:
            found.append(NUMPY[word](*(found[k] for k in args)))
    return np.broadcast_to(found[-1], SHAPE)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=60, deadline=None)
@given(regions(), st.integers(0, 2**32))
def test_generated_regions_agree_on_both_paths_and_with_numpy(region, seed):
    name, inputs, steps = region
    dtype = BY_NAME[name]
    module = program(dtype, inputs, region_of(dtype, inputs, steps))
    copyir.verify(module)
    arrays = {f"x{k}": values(dtype, seed + k) for k in range(inputs)}
    reference = run_reference(module.ops.first, arrays)["y"]
    stream = copyir.run(module, arrays)["y"]
    with np.errstate(all="ignore"):
        want = by_numpy(dtype, list(arrays.values()), steps).astype(dtype.numpy)
    assert reference.dtype == stream.dtype == want.dtype
    assert reference.tobytes() == stream.tobytes()
    assert reference.tobytes() == want.tobytes()


def test_bfloat16_rounds_after_each_operation_on_both_paths():
    """(a * b) + c in bfloat16: the product rounds before the sum."""
    dtype = BY_NAME["bf16"]
    steps = [("mul", 0, 1), ("add", 3, 2)]
    module = program(dtype, 3, region_of(dtype, 3, steps))
    arrays = {f"x{k}": values(dtype, k) for k in range(3)}
    f32 = np.float32
    a, b, c = (arrays[f"x{k}"].astype(f32) for k in range(3))
    rounded = ((a * b).astype(ml_dtypes.bfloat16).astype(f32) + c).astype(
        ml_dtypes.bfloat16
    )
    once = (a * b + c).astype(ml_dtypes.bfloat16)
    assert not np.array_equal(rounded, once, equal_nan=True)  # it matters here
    for got in (
        run_reference(module.ops.first, arrays)["y"],
        copyir.run(module, arrays)["y"],
    ):
        assert got.tobytes() == rounded.tobytes()
