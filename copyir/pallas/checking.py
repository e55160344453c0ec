"""`checking()`: every `pallas_call` run by copyir, eagerly or in `jax.jit`.

Inside the context (`hook.forced`) each `pallas_call` lowers to one
ordered `io_callback`. Its kernel is imported, verified and lowered to
a DMA stream when JAX lowers the call, so static errors (an unsupported
construct, a window out of bounds) are raised there, as Python exceptions
at the user's call. The callback runs the stream on the operands it
receives. A failed run-time check (a race, a wait that can never finish)
raised inside a callback reaches the caller as XLA's `JaxRuntimeError`
with a traceback in its text; the original `CopyIRError`, located at the
kernel's line, is kept and raised in its place where the context ends
(and by the pytest plugin where a test ends).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from copyir.errors import Located
from copyir.mlir import gc_paused
from copyir.names import FreshNames
from copyir.pallas.calls import ImportedKernel, grid_semantics, import_call
from copyir.pallas.hook import Routed, forced
from copyir.stream import Stream

Observer = Callable[[ImportedKernel, Stream, dict[str, np.ndarray]], None]
"""What sees each kernel's run: the import, its stream, its outputs."""


@dataclasses.dataclass(eq=False)
class _Session:
    """One `checking()` extent: who observes, and the error a callback
    raised that XLA has not yet handed back as its own. Callbacks run on
    XLA's threads and find the innermost session at run time: two threads
    checking at once share the innermost one."""

    observe: Observer | None = None
    failure: Located | None = None
    """A `CopyIRError`, or a `CopyIRWarning` raised as an error (warnings
    filtered to `error`, as in a strict pytest run)."""
    replay: list[tuple[int, ...]] | None = None
    """Grid points in the order another run visited them, every kernel's
    in turn (`compare` gives Pallas' recorded order)."""
    replayed: int = 0

    def orders(self, grid: tuple[int, ...], parallel: list[int]) -> tuple | None:
        """The next kernel's orders of its parallel grid dimensions (their
        coordinates by first visit), or None where nothing is replayed."""
        if self.replay is None:
            return None
        count = int(np.prod(grid, dtype=np.int64))
        points = self.replay[self.replayed : self.replayed + count]
        self.replayed += count
        return tuple(
            tuple(dict.fromkeys(point[d] for point in points)) for d in parallel
        )


_sessions: list[_Session] = []


@dataclasses.dataclass(frozen=True)
class _Equation:
    """What `import_call` reads of a `pallas_call` equation."""

    params: dict[str, Any]
    invars: Sequence[Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CopyIR(Routed):
    """Interpret-mode parameters that run each `pallas_call` on copyir."""

    mode: str = "random"
    seed: int = 0
    opaque_compute: bool = False
    adds_as_copies: bool = False
    """Run DMAs given `add=True` as copies, as interpret mode does (jax
    0.10.2): `compare` tells that divergence apart with it."""

    def lower(self, operands: Sequence[Any], params: dict[str, Any]) -> Sequence[Any]:
        import jax
        from jax.experimental import io_callback

        from copyir.api import lowered_stream

        call = _Equation(params, operands)
        imported = import_call(
            call, None, FreshNames(), opaque_compute=self.opaque_compute
        )
        with gc_paused():
            stream = lowered_stream(imported.module, in_place=True)
        if self.adds_as_copies:
            stream.instructions["add"] = False
        shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in params["out_avals"]]
        grid = tuple(params["grid_mapping"].grid)
        semantics = grid_semantics(params.get("compiler_params"), len(grid)) or []
        parallel = [d for d, word in enumerate(semantics) if word == "parallel"]
        run = _Run(imported, stream, self.mode, self.seed, grid, parallel)
        return io_callback(run, shapes, *operands, ordered=True)


@dataclasses.dataclass(frozen=True, eq=False)
class _Run:
    """The host callback of one lowered `pallas_call` (hashed by identity,
    as JAX requires of equation parameters)."""

    imported: ImportedKernel
    stream: Stream
    mode: str
    seed: int
    grid: tuple[int, ...]
    parallel: list[int]
    """The grid dimensions with parallel semantics."""

    def __call__(self, *values: Any) -> list[Any]:
        from copyir.backends.interpreter import run_stream
        from copyir.backends.interpreter.completion import Replayed, completion_model

        kernel = self.imported.called_on(values)
        session = _sessions[-1] if _sessions else _Session()
        model = completion_model(self.mode, self.seed)
        orders = session.orders(self.grid, self.parallel)
        if orders:
            model = Replayed(model, orders)
            kernel = dataclasses.replace(
                kernel, order=model.iteration_order(self.stream)
            )
        try:
            results = run_stream(self.stream, kernel.inputs, model, self.seed)
        except Located as err:
            session.failure = err
            raise
        if session.observe is not None:
            session.observe(kernel, self.stream, results)
        return [results[name] for name in kernel.outputs]


@contextlib.contextmanager
def checking(
    mode: str = "random",
    seed: int = 0,
    *,
    opaque_compute: bool = False,
    observe: Observer | None = None,
    replay: Sequence[tuple[int, ...]] | None = None,
    adds_as_copies: bool = False,
) -> Iterator[None]:
    """Run every `pallas_call` executed inside on copyir, in `mode`
    (`random`, `eager` or `on_wait`) seeded by `seed`; the kernel's own
    `interpret=` is ignored. A failed check raises its `CopyIRError`.
    `observe(kernel, stream, outputs)` sees each kernel's run; `replay`
    gives the grid points in the order to visit them, kernel after kernel
    (the parallel dimensions' orders are taken from it)."""
    from copyir.backends.interpreter.completion import completion_model

    completion_model(mode, seed)  # an unknown mode or a bad seed, here
    _quiet_callback_log()
    session = _Session(observe, replay=None if replay is None else list(replay))
    _sessions.append(session)
    try:
        params = CopyIR(
            mode=mode,
            seed=seed,
            opaque_compute=opaque_compute,
            adds_as_copies=adds_as_copies,
        )
        with forced(params):
            yield
    except Exception as exc:
        original = failure_behind(exc, session)
        if original is None:
            raise
        raise original from None
    finally:
        _sessions.remove(session)


def failure_behind(
    exc: BaseException, session: _Session | None = None
) -> Located | None:
    """The `CopyIRError` (or warning raised as an error) that a copyir
    callback raised and XLA turned into `exc`, if it is one; consumed:
    it is handed back once."""
    import jax

    found = [session] if session is not None else _sessions[::-1]
    if not isinstance(exc, jax.errors.JaxRuntimeError):
        return None
    for candidate in found:
        failure = candidate.failure
        if failure is not None and str(failure).splitlines()[0] in str(exc):
            candidate.failure = None
            return failure
    return None


class _CopyIRFailures(logging.Filter):
    """Drop JAX's log of a callback failure that is a copyir verdict: the
    verdict is raised to the user, located."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, Located)


def _quiet_callback_log() -> None:
    logger = logging.getLogger("jax._src.callback")
    if not any(isinstance(f, _CopyIRFailures) for f in logger.filters):
        logger.addFilter(_CopyIRFailures())
