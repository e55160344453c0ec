"""A run's inputs: checked against the stream's parameters, or made up.

Every input names a parameter of the stream and has its shape and dtype;
`fill_inputs` binds the parameters a user left out (zeros, 0, 1, 2, ...,
or seeded random values).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from copyir import errors
from copyir.dtypes import BY_NAME
from copyir.errors import CopyIRError, InvocationError
from copyir.stream import Stream


def as_input(array: np.ndarray, want: np.dtype) -> np.ndarray:
    """The array as the parameter's dtype when it only lost its name.

    `.npy` files keep bfloat16 data as raw 2-byte records (`V2`); read back,
    those are the same bytes, so they are taken as bfloat16.
    """
    array = np.asarray(array)
    raw = array.dtype.kind == "V" and not array.dtype.names
    if array.dtype != want and raw and array.dtype.itemsize == want.itemsize:
        return array.view(want)
    return array


def check_names(stream: Stream, names) -> None:
    """Each input name is a parameter's."""
    params = {b.name: b for b in stream.buffers if b.param}
    for name in names:
        if name not in params:
            raise InvocationError(
                errors.RUN_UNKNOWN_INPUT.format(
                    name=name, kernel=stream.kernel, params=", ".join(params)
                )
            )


def check_inputs(stream: Stream, inputs: Mapping[str, np.ndarray]) -> None:
    """Each input names a parameter and has its shape and dtype."""
    check_names(stream, inputs)
    params = {b.name: b for b in stream.buffers if b.param}
    for name, value in inputs.items():
        buffer = params[name]
        array = as_input(value, BY_NAME[buffer.dtype].numpy)
        if array.dtype != BY_NAME[buffer.dtype].numpy or array.shape != buffer.shape:
            raise InvocationError(
                errors.RUN_INPUT_MISMATCH.format(
                    name=name,
                    got=f"{array.dtype.name}{list(array.shape)}",
                    want=f"{buffer.dtype}{list(buffer.shape)}",
                )
            )


def fill_inputs(
    stream: Stream, inputs: Mapping[str, np.ndarray], fill: str, seed: int = 0
) -> dict[str, np.ndarray]:
    """The inputs, plus every other parameter bound to zeros, to 0, 1, 2, ...
    (cast to its dtype), or to random values."""
    rng = np.random.default_rng(seed)
    filled = dict(inputs)
    for buffer in stream.buffers:
        if not buffer.param or buffer.name in filled:
            continue
        dtype = BY_NAME[buffer.dtype].numpy
        count = buffer.nbytes // dtype.itemsize
        try:
            if fill == "zeros":
                values = np.zeros(count, dtype)
            elif fill == "iota":
                values = np.arange(count).astype(dtype)
            else:
                values = rng.integers(0, 100, count).astype(dtype)
        except (MemoryError, ValueError) as err:  # the machine cannot hold it
            raise CopyIRError(
                errors.CANNOT_ALLOCATE_INPUT.format(
                    size=buffer.nbytes, name=buffer.name, why=err
                )
            ) from None
        filled[buffer.name] = values.reshape(buffer.shape)
    return filled
