"""What the benchmark scripts share: timing what a user pays, fresh arrays,
stream sizes, and measurements in processes of their own.

Every figure is what a user pays. A call is timed as one call with the
garbage collector on, as a user's program runs it: the collections it
triggers count, and so does the collection of the garbage it leaves (the
IR it built and dropped), which a program pays at its next full
collection or at exit, so every timing ends with one. Nothing is
collected outside a timing: the garbage of a call is never left for the
next one to pay, nor quietly dropped. The collector's share is printed
beside the total (`Paid.collector`), never subtracted from it. The command
line is timed as a process of its own, start-up included (`command`).
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

REPEAT = 3
"""Subprocess measurements are the best (or median) of this many runs."""


@dataclass(frozen=True)
class Paid:
    """One call's cost: wall and CPU seconds, the collector's included."""

    seconds: float
    cpu: float
    collector: float
    """Of `cpu`: in the garbage collector, during the call and after."""

    def __add__(self, other: Paid) -> Paid:
        return Paid(
            self.seconds + other.seconds,
            self.cpu + other.cpu,
            self.collector + other.collector,
        )

    def __str__(self) -> str:
        return f"{self.cpu:.2f} s CPU (collector {self.collector:.2f} s)"


@contextlib.contextmanager
def _collector_clock(spent: list[float]):
    """Adds to `spent[0]` the seconds of every collection in the block."""
    started = [0.0]

    def clock(phase: str, _info: dict) -> None:
        if phase == "start":
            started[0] = time.process_time()
        else:
            spent[0] += time.process_time() - started[0]

    gc.callbacks.append(clock)
    try:
        yield
    finally:
        gc.callbacks.remove(clock)


def paid(fn) -> tuple[Paid, object]:
    """(what one call of `fn` costs, its result): the call with the
    collector on, then a full collection of what it left (see the
    module's doc). The objects that exist before the call (the modules
    imported, the benchmark's own arrays) are frozen meanwhile, so that
    the collections walk what the call made, as they would in a small
    program, not the benchmark's heap."""
    spent = [0.0]
    gc.freeze()
    try:
        with _collector_clock(spent):
            start, cpu = time.perf_counter(), time.process_time()
            result = fn()
            gc.collect()
            seconds = time.perf_counter() - start
            cpu = time.process_time() - cpu
    finally:
        gc.unfreeze()
    return Paid(seconds, cpu, spent[0]), result


def timed(fn):
    """(seconds, result) of one call, as `paid` counts it."""
    cost, result = paid(fn)
    return cost.seconds, result


@dataclass(frozen=True)
class Process:
    """A command's cost as a process of its own: medians of its runs."""

    seconds: float
    cpu: float
    """User and system CPU seconds of the process."""


def command_cost(args: list[str], repeat: int = REPEAT) -> Process:
    """`args` run as a process `repeat` times: the median wall and CPU
    seconds (the process must succeed)."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return Process(statistics.median(walls), statistics.median(cpus))


def copyir_command(*args: str) -> list[str]:
    """The `copyir` command line, run by this Python (as `python -m`)."""
    return [sys.executable, "-m", "copyir", *args]


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


@dataclass(frozen=True)
class VersusCommand:
    """One program through the API as one call and through the command line
    as a process, beside the start-up of the same command on a tiny
    program: the command line should cost at most the call plus start-up."""

    command: str
    call: Paid
    process: Process
    startup: Process

    def lines(self) -> list[str]:
        over = self.process.cpu - self.startup.cpu
        verdict = "met" if over <= self.call.cpu else "NOT met"
        return [
            f"the API as one call {self.call.seconds:.2f} s, CPU "
            f"{self.call.cpu:.2f} s (collector {self.call.collector:.2f} s)",
            f"`copyir {self.command}` as a process {self.process.seconds:.2f} s, "
            f"CPU {self.process.cpu:.2f} s; start-up (a tiny program) "
            f"{self.startup.seconds:.2f} s, CPU {self.startup.cpu:.2f} s",
            f"CPU of the process beyond start-up {over:.2f} s against the "
            f"call's {self.call.cpu:.2f} s (target: at most; {verdict})",
        ]


def _api_call(command: str, text: str, inputs: dict[str, np.ndarray]):
    """The API call that does what `copyir command FILE` does."""
    import copyir

    if command == "run":
        return lambda: copyir.run(text, inputs)
    if command == "lower":
        return lambda: copyir.dma_text(copyir.lower(text))
    return lambda: copyir.verify(text)


def versus_command(
    text: str,
    tiny: str,
    inputs: dict[str, np.ndarray] | None = None,
    *,
    command: str = "run",
    suffix: str = ".cpy",
    repeat: int = REPEAT,
) -> VersusCommand:
    """The API call against `copyir COMMAND FILE` as a process (medians of
    `repeat`), and the same command on `tiny`. `run` runs on zeros (the
    process with `--fill-inputs zeros`, the call on `inputs`, which must
    be zeros); `lower` prints the .dma text (to a file); `verify` verifies."""
    import tempfile
    from pathlib import Path

    call = _api_call(command, text, inputs or {})
    calls = [paid(call)[0] for _ in range(repeat)]
    median = sorted(calls, key=lambda c: c.cpu)[len(calls) // 2]
    with tempfile.TemporaryDirectory() as folder:

        def args(name: str, source: str) -> list[str]:
            path = Path(folder, name + suffix)
            path.write_text(source)
            if command == "run":
                return copyir_command("run", str(path), "--fill-inputs", "zeros")
            if command == "lower":
                out = str(Path(folder, name + ".dma"))
                return copyir_command("lower", str(path), "-o", out)
            return copyir_command("verify", str(path))

        process = command_cost(args("program", text), repeat)
        startup = command_cost(args("tiny", tiny), repeat)
    return VersusCommand(command, median, process, startup)
