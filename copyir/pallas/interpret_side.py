"""Pallas' own TPU interpret mode, run as one side of the differential
harness (issue 18): a verdict, the outputs and the explicit DMAs' events.

`run_interpret(f, args, mode=...)` runs `f(*args)` with every `pallas_call`
forced into TPU interpret mode (`hook.forced`, which also reaches a call
built before the run) with
`pltpu.InterpretParams(dma_execution_mode=mode, detect_races=True)`.

Interpret mode has no public event API, so this module reaches into its
private module `jax._src.pallas.mosaic.interpret.interpret_pallas_call`: it
replaces the module-level callbacks `dma_start`, `dma_wait` and
`semaphore_wait` with wrappers, once and for good (`_install`). The
interpreter looks them up when it lowers a kernel, and jit caches what it
lowered, so wrappers installed only for the extent of a run could be
bypassed by an executable lowered before; installed permanently (and with
jax's caches cleared at installation), every executable lowered afterwards
calls them. Outside a run they only call through; during one they record
into the active `_Recording`.

Hangs: interpret mode blocks forever on a wait that nothing can satisfy
(`Semaphore.wait` in its `shared_memory.py`, which polls every 0.1 s and
checks the shared memory's failure flag each time). The wrapped waits arm a
timer; a wait still blocked after `timeout` seconds is failed through
interpret mode's own failure path, `SharedMemory.set_failed`, exactly as if
another callback had raised. This is safe for later runs: the blocked
callback thread is not abandoned but returns (raising) within 0.1 s, so the
chain of ordered io_callback tokens completes, with an error, and no thread
is left holding a lock or a token; `reset_tpu_interpret_mode_state()` (public
as `pltpu.reset_tpu_interpret_mode_state`) then drops the failed shared
memory before the next run. Only waits are guarded: a kernel that loops
forever elsewhere is not stopped.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jax
import numpy as np
from jax._src import config as jax_config
from jax._src import source_info_util
from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
from jax._src.pallas.mosaic.interpret import utils as interpret_utils
from jax.experimental.pallas import tpu as pltpu

from copyir.pallas import jax_compat
from copyir.pallas.hook import forced

Verdict = Literal["ok", "error", "race", "hang"]
Region = tuple[tuple[int, int], ...]
"""(start, stop) per dimension of the buffer."""
Event = tuple[Any, ...]
"""`("start", (buffer, region), (buffer, region), sem)` or
`("wait", sem, nbytes)`."""
GridPoint = tuple[tuple[int, ...], int]
"""A grid point's coordinates and the local core that ran it."""


@dataclass(frozen=True)
class InterpretRun:
    """What one run in interpret mode gave."""

    verdict: Verdict
    outputs: list[np.ndarray] | None
    """The results' leaves, or None where the run gave none. A race in JAX
    0.10 still gives outputs; in 0.12 it raises, and gives none."""
    events: list[Event]
    """The explicit DMAs' events in the order interpret mode ran them,
    canonical (`canonical`). Grid `BlockSpec` copies make none."""
    message: str
    """The error, race or hang text; "" when ok."""
    grid_points: list[GridPoint] = field(default_factory=list)
    """The grid points in the order interpret mode ran them (parallel
    dimensions in its random order)."""
    printed: str = ""
    """What interpret mode printed (and this run kept off the terminal):
    races in 0.10, `Semaphore ... has non-zero count ... at kernel exit`
    for a DMA never waited, ..."""


def canonical(events: Iterable[Event]) -> list[Event]:
    """Events with buffers and semaphores renamed by first appearance, so
    that two runs compare equal up to renaming. A raw event names a buffer
    as `(memory_space, identity)` and a semaphore by any hashable identity;
    the canonical one as `"<memory_space><n>"` (one count over all buffers:
    `hbm0`, `vmem1`, `hbm2`) and `"s<n>"`."""
    buffers: dict[Hashable, str] = {}
    sems: dict[Hashable, str] = {}

    def buffer(raw: tuple[str, Hashable]) -> str:
        return buffers.setdefault(raw, f"{raw[0]}{len(buffers)}")

    def sem(raw: Hashable) -> str:
        return sems.setdefault(raw, f"s{len(sems)}")

    renamed: list[Event] = []
    for event in events:
        if event[0] == "start":
            _, (src, src_region), (dst, dst_region), dst_sem = event
            src = (buffer(src), src_region)
            dst = (buffer(dst), dst_region)
            renamed.append(("start", src, dst, sem(dst_sem)))
        else:
            _, wait_sem, nbytes = event
            renamed.append(("wait", sem(wait_sem), nbytes))
    return renamed


def _pipelines_traced() -> contextlib.AbstractContextManager:
    """`emit_pipeline` traced into its loops, not kept as one equation:
    interpret mode of JAX 0.12 fails on a nested pipeline's equation
    (`Triggering __jax_array__() during abstractification`), and the traced
    form is the same `_emit_pipeline` schedule."""
    return jax_config.use_emit_pipeline_primitive(False)


def run_interpret(
    f: Callable[..., Any], args: Sequence[Any], *, mode: str, timeout: float = 10.0
) -> InterpretRun:
    """`f(*args)` with every `pallas_call` in Pallas' TPU interpret mode
    (`mode` is `eager` or `on_wait`), printing nothing. A wait blocked for
    `timeout` seconds ends the run as a hang: the run returns at most
    `timeout` (and interpret mode's 0.1 s poll) after the hanging wait
    began. Runs are serialised: interpret mode's state is global."""
    if mode not in ("eager", "on_wait"):
        raise ValueError(f"mode must be 'eager' or 'on_wait', not {mode!r}")
    _install()
    params = pltpu.InterpretParams(
        dma_execution_mode=mode,
        detect_races=True,
        grid_point_recorder=_record_grid_point,
    )
    with _RUN_LOCK:
        recording = _Recording(params, timeout)
        printed = io.StringIO()
        outputs: list[np.ndarray] | None = None
        error = ""
        pltpu.reset_tpu_interpret_mode_state()
        with _recording(recording), _quiet(printed):
            try:
                with forced(params), _pipelines_traced():
                    result = f(*args)
                outputs = [np.asarray(leaf) for leaf in jax.tree.leaves(result)]
            except Exception as e:
                error = _error_text(e)
        race = jax_compat.interpret_race(ipc.races, printed.getvalue(), error)
        pltpu.reset_tpu_interpret_mode_state()
    if race:
        verdict, message = "race", race
    elif recording.hang:
        verdict, message, outputs = "hang", recording.hang, None
    elif error:
        verdict, message, outputs = "error", error, None
    else:
        verdict, message = "ok", ""
    return InterpretRun(
        verdict=verdict,
        outputs=outputs,
        events=canonical(recording.events),
        message=message,
        grid_points=recording.grid_points,
        printed=printed.getvalue(),
    )


def _error_text(error: Exception) -> str:
    """`Type: message` of the innermost exception. An exception raised in
    one of interpret mode's callbacks reaches the caller as a
    `JaxRuntimeError` whose text is the callback's traceback (in 0.10,
    nested in `Computation failed ... with exception:`); its last exception
    line, after the last frame, is the error interpret mode found."""
    text = str(error)
    lines = text.rstrip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    if not frames:
        return f"{type(error).__name__}: {text}"
    return "\n".join(line for line in lines[frames[-1] + 1 :] if line[:4] != "    ")


# -- recording ---------------------------------------------------------------------


class _Recording:
    """The events, grid points and hang of the run in progress; callbacks
    may come from several threads (one per core)."""

    def __init__(self, params: Any, timeout: float) -> None:
        self.params = params
        self.timeout = timeout
        self.lock = threading.Lock()
        self.events: list[Event] = []
        self.grid_points: list[GridPoint] = []
        self.hang = ""
        self.kernels: dict[int, tuple[int, object]] = {}

    def kernel(self) -> int:
        """The index in the run of the `pallas_call` running now: interpret
        mode makes one shared memory per call, and numbers its buffers and
        semaphores afresh in each. Each one seen is kept, so that no `id` is
        reused during the run."""
        shared_memory = ipc._shared_memory
        with self.lock:
            index, _ = self.kernels.setdefault(
                id(shared_memory), (len(self.kernels), shared_memory)
            )
            return index

    def add(self, event: Event) -> None:
        with self.lock:
            self.events.append(event)

    @contextlib.contextmanager
    def watchdog(self, what: str) -> Iterator[None]:
        """Fails interpret mode's shared memory if the body (a blocking
        wait) has not returned after `timeout` seconds."""
        shared_memory = ipc._shared_memory
        finished = threading.Lock()
        done = False

        def expire() -> None:
            with finished:
                if done or shared_memory is None:
                    return
                with self.lock:
                    self.hang = f"{what} blocked for more than {self.timeout:g} s"
                shared_memory.set_failed(_WaitTimedOut(self.hang), top_level=False)

        timer = threading.Timer(self.timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            with finished:
                done = True
            timer.cancel()


class _WaitTimedOut(Exception):
    """A wait that the watchdog ended (interpret mode reports it)."""


_RUN_LOCK = threading.Lock()
_active: _Recording | None = None


@contextlib.contextmanager
def _recording(recording: _Recording) -> Iterator[None]:
    global _active
    _active = recording
    try:
        yield
    finally:
        _active = None


@contextlib.contextmanager
def _quiet(sink: io.StringIO) -> Iterator[None]:
    """Interpret mode prints from its callbacks' threads: `sys.stdout` is
    swapped for the whole process, so those prints land in `sink` too."""
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


def _record_grid_point(token: Any, grid_point: Any, core: Any) -> Any:
    """`InterpretParams.grid_point_recorder`: one function for every run, so
    that equal params hit jit's cache."""
    recording = _active
    if recording is not None:
        point = tuple(int(i) for i in np.asarray(grid_point).reshape(-1))
        with recording.lock:
            recording.grid_points.append((point, int(core)))
    return token


# -- the wrapped callbacks -----------------------------------------------------------


_installed = False


def _install() -> None:
    """Wraps interpret mode's DMA and wait callbacks, once; clears jax's
    caches so that no executable lowered without the wrappers is reused."""
    global _installed
    if _installed:
        return
    ipc.dma_start = _recorded_start(ipc.dma_start)
    ipc.dma_wait = _recorded_wait(ipc.dma_wait)
    ipc.semaphore_wait = _guarded_wait(ipc.semaphore_wait, "semaphore wait")
    tpu_info = jax_compat.tpu_info_module()
    tpu_info._get_tiling_factor = _ending_tiling(tpu_info._get_tiling_factor)
    jax.clear_caches()
    _installed = True


def _recorded_start(real: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(real)

    @functools.wraps(real)
    def dma_start(*args: Any, **kwargs: Any) -> Any:
        recording = _active
        if recording is not None:
            arguments = signature.bind(*args, **kwargs).arguments
            recording.add(_start_event(arguments, recording.kernel()))
        return real(*args, **kwargs)

    return dma_start


def _recorded_wait(real: Callable[..., Any]) -> Callable[..., Any]:
    guarded = _guarded_wait(real, "DMA wait")

    @functools.wraps(real)
    def dma_wait(token, device_id, local_core_id, sem_id, size, **kwargs: Any) -> Any:
        recording = _active
        if recording is not None:
            core = _global_core(int(device_id), int(local_core_id))
            sem = (recording.kernel(), int(sem_id), core)
            recording.add(("wait", sem, int(size)))
        return guarded(token, device_id, local_core_id, sem_id, size, **kwargs)

    return dma_wait


def _guarded_wait(real: Callable[..., Any], what: str) -> Callable[..., Any]:
    @functools.wraps(real)
    def wait(*args: Any, source_info: Any = None, **kwargs: Any) -> Any:
        recording = _active
        if recording is None:
            return real(*args, source_info=source_info, **kwargs)
        where = f" at {source_info_util.summarize(source_info)}" if source_info else ""
        with recording.watchdog(what + where):
            return real(*args, source_info=source_info, **kwargs)

    return wait


TILING_NEVER_ENDS = (
    "Pallas' _get_tiling_factor doubles a packing of 0 (8-byte elements) "
    "while it is below the second-minor extent: its loop never ends"
)


class _TilingNeverEnds(Exception):
    """Raised in place of Pallas' endless tiling loop, ending the run."""


def _ending_tiling(real: Callable[..., Any]) -> Callable[..., Any]:
    """`tpu_info._get_tiling_factor`, which for 8-byte elements (a packing
    of `4 // 8 = 0`) doubles 0 forever while tracing a BufferedRef's copy:
    in a run, a hang reported at once instead."""

    @functools.wraps(real)
    def tiling_factor(src: int, max_tiling: int, packing: int) -> int:
        recording = _active
        if recording is not None and packing <= 0 < min(src, max_tiling):
            recording.hang = TILING_NEVER_ENDS
            raise _TilingNeverEnds(TILING_NEVER_ENDS)
        return real(src, max_tiling, packing)

    return tiling_factor


def _start_event(arguments: dict[str, Any], kernel: int) -> Event:
    """A `dma_start` callback's arguments as a raw event of the run's
    `kernel`-th `pallas_call`."""
    device = int(arguments["device_id"])
    src_core, dst_core = jax_compat.interpret_dma_cores(arguments)
    dst_device = arguments["dst_device_id"]
    dst_device = device if dst_device is None else int(dst_device)
    src = _buffer(
        arguments["src_memory_space"],
        arguments["src_id"],
        arguments["src_transforms"],
        (kernel, device, src_core),
    )
    dst = _buffer(
        arguments["dst_memory_space"],
        arguments["dst_id"],
        arguments["dst_transforms"],
        (kernel, dst_device, dst_core),
    )
    sem = (kernel, int(arguments["dst_sem_id"]), _global_core(dst_device, dst_core))
    return ("start", src, dst, sem)


def _buffer(
    space_index: Any, buffer_id: Any, transforms: Any, where: tuple[int, int, int]
) -> tuple[tuple[str, Hashable], Region | None]:
    """A DMA operand as `((memory space, identity), region)`: the identity
    is the kernel's index in the run and interpret mode's buffer key, and the
    region its transforms resolved against the buffer's shape (None where
    they are not indexers, which interpret mode refuses when it runs the
    DMA). `where` is (kernel, device, local core); HBM is one per device."""
    kernel, device, core = where
    space = ipc.TPU_MEMORY_SPACE_NAMES[int(space_index)]
    space = "hbm" if space == "any" else space
    key = (space, int(buffer_id), device, 0 if space == "hbm" else core)
    identity = (kernel, *key[1:])
    try:
        ranges = interpret_utils.to_range(jax.tree.map(int, transforms))
    except (AttributeError, TypeError, ValueError):
        return (space, identity), None
    return (space, identity), _region(ranges, _shape(key))


def _shape(key: tuple[str, int, int, int]) -> tuple[int, ...]:
    """The shape of interpret mode's buffer `key`, or () where there is no
    such buffer (its `dma_start` then fails)."""
    shared_memory = ipc._shared_memory
    buffer = None if shared_memory is None else shared_memory.mem.get(key)
    return tuple(getattr(buffer, "logical_shape", ()))


def _region(ranges: Sequence[slice | int], shape: tuple[int, ...]) -> Region:
    """(start, stop) per dimension of the buffer, from interpret mode's
    `to_range` (explicit slices and integers, for the leading dimensions):
    an integer index is one row, a dimension it leaves out is whole.
    Strides are dropped."""
    whole = [slice(0, size) for size in shape[len(ranges) :]]
    return tuple(
        (r, r + 1) if isinstance(r, int) else (r.start, r.stop)
        for r in (*ranges, *whole)
    )


def _global_core(device: int, core: int) -> int:
    shared_memory = ipc._shared_memory
    if shared_memory is None:
        return core
    return shared_memory.get_global_core_id(device, core)


__all__ = ["Event", "InterpretRun", "Region", "Verdict", "canonical", "run_interpret"]
