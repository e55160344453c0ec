"""What the benchmark scripts share: timing, fresh arrays, stream sizes, and
measurements in processes of their own."""

from __future__ import annotations

import gc
import io
import json
import resource
import subprocess
import sys
import time

import numpy as np

REPEAT = 3
"""Subprocess measurements are the best of this many runs."""


def timed(fn):
    """(seconds, result) of one call, after a collection."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def fresh_input(rows: int, cols: int = 128) -> np.ndarray:
    """An f32 array of distinct rows, filled in place (no temporary as large
    as itself)."""
    x = np.empty((rows, cols), np.float32)
    for start in range(0, rows, 1 << 16):
        stop = min(rows, start + (1 << 16))
        x[start:stop] = np.arange(start, stop, dtype=np.float32)[:, None]
    return x


def stream_size(program, stream) -> str:
    """A lowered program's size: instructions, .dma text and .npz bytes."""
    import copyir
    from copyir.stream import save_npz

    data = io.BytesIO()
    save_npz(stream, data)
    text = copyir.dma_text(program)
    return (
        f"{len(stream.instructions)} instructions, {len(text):,} bytes of text, "
        f"{len(data.getvalue()):,} bytes npz"
    )


def peak_bytes() -> int:
    """This process's peak resident memory so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def in_subprocess(script: str, *args: str) -> dict:
    """A measurement in processes of its own (its memory, its first touch of
    fresh pages, which is slow and noisy here, nothing left over from other
    measurements): `script args` prints a JSON dict as its last line; each
    figure is the least of REPEAT runs."""
    best: dict = {}
    for _ in range(REPEAT):
        result = subprocess.run(
            [sys.executable, script, *args], capture_output=True, text=True, check=True
        )
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        for key, value in figures.items():
            best[key] = min(best.get(key, value), value)
    return best
