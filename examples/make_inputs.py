"""Write each example's inputs, `<example>.inputs.npz`, next to it.

    python examples/make_inputs.py

Only the parameters a program reads are inputs; the others are outputs and
start unwritten. Values are small repeating patterns, so the files stay
small, cast to each parameter's dtype.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import copyir
from copyir.dtypes import BY_NAME

HERE = Path(__file__).parent


def read_parameters(stream) -> list:
    starts = stream.instructions[stream.instructions["op"] == 0]
    return [
        b
        for b in stream.buffers
        if b.param
        and (
            (starts["src_address"] >= b.address)
            & (starts["src_address"] < b.address + b.nbytes)
            & (starts["src_space"] == 0)
        ).any()
    ]


def main() -> None:
    for path in sorted(HERE.glob("*.cpy")):
        name = str(path.relative_to(HERE.parent))
        stream = copyir.to_stream(copyir.lower(copyir.parse(path.read_text(), name)))
        arrays = {}
        for buffer in read_parameters(stream):
            count = int(np.prod(buffer.shape))
            pattern = np.arange(count) % 251 - 50
            arrays[buffer.name] = pattern.astype(BY_NAME[buffer.dtype].numpy).reshape(
                buffer.shape
            )
        np.savez_compressed(path.with_suffix(".inputs.npz"), **arrays)
        print(path.with_suffix(".inputs.npz").name, sorted(arrays))


if __name__ == "__main__":
    main()
