"""`compare(f, *args)`: copyir and Pallas' TPU interpret mode, side by side.

`f(*args)` runs both ways in the two completion modes both have (`eager`,
`on_wait`; copyir's `random` has no Pallas counterpart): interpret mode
with `InterpretParams(dma_execution_mode=mode, detect_races=True)`
(`interpret_side.run_interpret`), copyir inside `checking(mode)`. Three
things are compared, in order, each only where the one before agrees:

- the verdicts: ok, error, race or hang (copyir's "a wait that can never
  finish" is a hang it reports instead of waiting forever);
- the outputs, bit for bit (NaN equal to NaN, whatever its payload);
- the explicit DMAs' schedule, event for event, buffers and semaphores up
  to renaming (`interpret_side.canonical`). Grid `BlockSpec` copies make no
  events in interpret mode; where a kernel has them, only outputs are
  compared.

Every difference is matched against `KNOWN`, the divergences understood
(each with its reason); one that matches none is *unclassified*: a bug of
one side until someone shows which.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from copyir import errors
from copyir.errors import CopyIRError
from copyir.pallas.calls import ImportedKernel
from copyir.pallas.interpret_side import InterpretRun, canonical, run_interpret
from copyir.stream import COMPUTE

SHARED_MODES = ("eager", "on_wait")
"""The completion modes both sides have."""

ULPS = 4
"""How far apart (in units in the last place) two floats may be and be
called XLA's rewriting (`float-rewrites` below)."""


@dataclass(frozen=True)
class CopyIRRun:
    """What one run on copyir gave (the same fields as `InterpretRun`)."""

    verdict: str
    """ok, error, race, hang or unsupported (a construct not imported)."""
    outputs: list[np.ndarray] | None
    events: list[tuple]
    message: str
    feature: str = ""
    """For `unsupported`: what is not supported."""
    adds: bool = False
    """Whether a DMA of the run accumulates (`add=True`)."""
    grid_copies: bool = False
    """Whether a kernel of the run has grid `BlockSpec` copies."""
    computes: bool = False
    """Whether a kernel of the run computes (`copy.compute`)."""
    warned: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Evidence:
    """What a known divergence is recognised by: one mode's two runs,
    interpret mode's run in the other mode, and copyir's run with every
    DMA copying (`add=True` ignored, as interpret mode does), where some
    DMA accumulates."""

    mode: str
    ours: CopyIRRun
    theirs: InterpretRun
    theirs_other: InterpretRun | None = None
    ours_copying: CopyIRRun | None = None


@dataclass(frozen=True)
class Divergence:
    """A difference understood: its name, what each side does and why."""

    name: str
    what: str
    kind: str
    """verdict, output or schedule: the comparison it explains."""
    applies: Callable[[Evidence], bool]


def _is(message: str, template: str) -> bool:
    """Whether a message is an instance of an `errors` template."""
    head = template.split("{")[0]
    return bool(head) and message.startswith(head)


def _uninitialized(e: Evidence) -> bool:
    return e.theirs.verdict == "ok" and (
        _is(e.ours.message, errors.RUN_UNINITIALIZED)
        or _is(e.ours.message, errors.RUN_COMPUTE_UNINITIALIZED)
    )


def _leftovers(e: Evidence) -> bool:
    return e.theirs.verdict == "ok" and any(
        _is(e.ours.message, t)
        for t in (
            errors.RUN_LEFTOVERS,
            errors.RUN_SCOPE_IN_FLIGHT,
            errors.RUN_SEMAPHORE_NOT_ZERO,
        )
    )


def _grid_output_one_buffer(e: Evidence) -> bool:
    """A grid kernel whose body wrote an output block in part: copyir
    warned that a write-back copied window memory the body did not write."""
    return e.ours.grid_copies and any(
        _is(w, errors.RUN_UNWRITTEN_WINDOW) for w in e.ours.warned
    )


def _window_layout(e: Evidence) -> bool:
    """The same events but for the VMEM side's coordinates: equal when each
    VMEM region is taken by its element count (HBM regions, semaphores,
    byte counts and order exact)."""
    return _by_vmem_size(e.ours.events) == _by_vmem_size(e.theirs.events)


def _by_vmem_size(events: list) -> list:
    def end(buffer_region):
        buffer, region = buffer_region
        if not buffer.startswith("vmem"):
            return buffer_region
        return buffer, math.prod(stop - start for start, stop in region)

    return [
        (e[0], end(e[1]), end(e[2]), e[3]) if e[0] == "start" else e for e in events
    ]


def _semaphore_allocation(e: Evidence) -> bool:
    """The same DMAs and waits, each wait on the semaphore of the start it
    completes, on semaphores allocated otherwise: equal when each start
    names its own fresh semaphore and each wait the latest start's on its
    semaphore (everything else exact)."""
    return _by_start(e.ours.events) == _by_start(e.theirs.events)


def _by_start(events: list) -> list:
    latest: dict[str, str] = {}
    out = []
    for k, event in enumerate(events):
        if event[0] == "start":
            latest[event[3]] = f"start {k}"
            out.append((*event[:3], latest[event[3]]))
        elif event[0] == "wait":
            out.append((event[0], latest.get(event[1], event[1]), *event[2:]))
        else:
            out.append(event)
    return out


def _parallel_revisit(e: Evidence) -> bool:
    return e.theirs.verdict == "ok" and _is(e.ours.message, errors.PARALLEL_REVISIT)


def _race_shown_by_pallas_itself(e: Evidence) -> bool:
    """copyir reports a race interpret mode's detector did not, and
    interpret mode's own outputs depend on its DMA timing: a race."""
    other = e.theirs_other
    return (
        e.ours.verdict == "race"
        and e.theirs.verdict == "ok"
        and other is not None
        and other.verdict == "ok"
        and not _same_outputs(e.theirs.outputs, other.outputs)
    )


_WRITE_WRITE = re.compile(r"Race: this DMA writes .* is in flight and writes it")


def _write_backs_in_flight(e: Evidence) -> bool:
    """copyir reports two DMAs in flight writing one region, and interpret
    mode says ok in both its modes with the same outputs: its DMAs land in
    the order they started, so the later write wins either way."""
    other = e.theirs_other
    return (
        e.ours.verdict == "race"
        and _WRITE_WRITE.match(e.ours.message) is not None
        and e.theirs.verdict == "ok"
        and other is not None
        and other.verdict == "ok"
        and _same_outputs(e.theirs.outputs, other.outputs)
    )


def _add_ignored(e: Evidence) -> bool:
    """copyir, with its DMAs copying, gives interpret mode's outputs."""
    copying = e.ours_copying
    return copying is not None and _same_outputs(copying.outputs, e.theirs.outputs)


def _float_rewrites(e: Evidence) -> bool:
    """The kernel computes, and every output is bit for bit equal but for
    floats within `ULPS`."""
    ours, theirs = e.ours.outputs or [], e.theirs.outputs or []
    return e.ours.computes and all(
        _within_ulps(a, b) for a, b in zip(ours, theirs, strict=True)
    )


KNOWN: tuple[Divergence, ...] = (
    Divergence(
        "uninitialized-read",
        "copyir refuses a read of memory nobody wrote; interpret mode reads "
        "its uninitialized value (NaN) and goes on",
        "verdict",
        _uninitialized,
    ),
    Divergence(
        "dma-left-in-flight",
        "copyir refuses a DMA never waited (at the kernel's or a scope's "
        "end); interpret mode at most prints that a semaphore ends non-zero",
        "verdict",
        _leftovers,
    ),
    Divergence(
        "parallel-revisit",
        "copyir refuses a grid whose parallel dimension visits one output "
        "block twice (its iterations may run on different cores); interpret "
        "mode runs them one after the other and writes the block twice",
        "verdict",
        _parallel_revisit,
    ),
    Divergence(
        "race-missed-by-interpret-mode",
        "copyir reports a race that interpret mode's detector does not, and "
        "interpret mode's outputs differ between its eager and on_wait "
        "modes: the race is real",
        "verdict",
        _race_shown_by_pallas_itself,
    ),
    Divergence(
        "write-write-race",
        "copyir reports two DMAs in flight writing one region (an "
        "emit_pipeline revisiting a block within its write-back lag starts "
        "the second write-back before waiting the first); interpret mode "
        "lands DMAs in the order they start, so the later one wins in both "
        "its modes and it sees no race",
        "verdict",
        _write_backs_in_flight,
    ),
    Divergence(
        "add-ignored",
        "interpret mode ignores a DMA's add=True (its dma_start callback is "
        "never given it: jax 0.10.2) and copies; copyir accumulates",
        "output",
        _add_ignored,
    ),
    Divergence(
        "grid-output-one-buffer",
        "a grid body wrote an output block in part: interpret mode gives a "
        "pallas_call's output one VMEM buffer for all blocks "
        "(interpret_pallas_call), so the rest carries the previous block; "
        "copyir's window has two slots, as emit_pipeline's, so it carries "
        "the block before that",
        "output",
        _grid_output_one_buffer,
    ),
    Divergence(
        "window-layout",
        "the same DMAs but for a VMEM window's coordinates: Pallas gives a "
        "trivially windowed operand's window no slot dimension and lays a "
        "1-D window's slots out flat (BufferedRef.create); copyir's windows "
        "are (slots, *block)",
        "schedule",
        _window_layout,
    ),
    Divergence(
        "semaphore-allocation",
        "the same DMAs and waits on semaphores allocated otherwise: Pallas' "
        "sync_copy (emit_pipeline with no_pipelining) takes a fresh "
        "semaphore in run_scoped at every copy; copyir's synchronous window "
        "copy has one semaphore per copy in the program",
        "schedule",
        _semaphore_allocation,
    ),
    Divergence(
        "float-rewrites",
        f"XLA on the CPU fuses multiply-add, folds constants across "
        f"operations and turns x / c into x * (1 / c); copyir rounds each "
        f"operation: floats within {ULPS} ULP",
        "output",
        _float_rewrites,
    ),
)


@dataclass(frozen=True)
class Difference:
    """Where the two sides differ in one mode, and what explains it."""

    mode: str
    kind: str
    detail: str
    known: Divergence | None

    def __str__(self) -> str:
        why = f"known: {self.known.name}" if self.known else "UNCLASSIFIED"
        return f"{self.mode}: {self.kind} differs ({why}): {self.detail}"


@dataclass(frozen=True)
class Comparison:
    """Both sides' runs in each mode, and the differences between them."""

    runs: dict[str, tuple[CopyIRRun, InterpretRun]]
    differences: list[Difference]

    @property
    def unsupported(self) -> str:
        """What copyir does not support yet, if that stopped it."""
        for ours, _ in self.runs.values():
            if ours.verdict == "unsupported":
                return ours.feature
        return ""

    @property
    def unclassified(self) -> list[Difference]:
        return [d for d in self.differences if d.known is None]

    @property
    def status(self) -> str:
        """agrees, differs (known), differs (unclassified) or not supported."""
        if self.unsupported:
            return "not supported"
        if not self.differences:
            return "agrees"
        return "differs (unclassified)" if self.unclassified else "differs (known)"

    def report(self) -> list[str]:
        """One line per mode and per difference, as `copyir check
        --compare` prints them."""
        lines = []
        for mode, (ours, theirs) in self.runs.items():
            lines.append(
                f"{mode}: copyir {ours.verdict}, interpret mode {theirs.verdict}"
                + _agreement(ours, theirs)
            )
        lines += [str(d) for d in self.differences]
        return lines


def _agreement(ours: CopyIRRun, theirs: InterpretRun) -> str:
    if ours.verdict == "unsupported":
        return f": {ours.feature} is not supported yet"
    if ours.verdict != theirs.verdict:
        return ""
    parts = []
    if ours.outputs is not None and theirs.outputs is not None:
        parts.append(f"{len(ours.outputs)} outputs")
    if not ours.grid_copies and ours.verdict == "ok":
        parts.append(f"{len(ours.events)} DMA events")
    return f" ({', '.join(parts)})" if parts else ""


def compare(
    f: Callable[..., Any],
    *args: Any,
    modes: Sequence[str] = SHARED_MODES,
    timeout: float = 10.0,
    opaque_compute: bool = False,
) -> Comparison:
    """`f(*args)` on copyir and in Pallas' TPU interpret mode, in each of
    `modes`; a wait in interpret mode blocked longer than `timeout`
    seconds is a hang."""
    theirs = {m: run_interpret(f, args, mode=m, timeout=timeout) for m in modes}
    runs: dict[str, tuple[CopyIRRun, InterpretRun]] = {}
    differences: list[Difference] = []
    for mode in modes:
        points = [point for point, _core in theirs[mode].grid_points]
        ours = run_copyir(
            f, args, mode=mode, opaque_compute=opaque_compute, replay=points
        )
        runs[mode] = (ours, theirs[mode])
        others = [theirs[m] for m in modes if m != mode]
        copying = None
        if ours.adds and ours.verdict == "ok":
            copying = run_copyir(
                f,
                args,
                mode=mode,
                opaque_compute=opaque_compute,
                replay=points,
                adds_as_copies=True,
            )
        evidence = Evidence(
            mode, ours, theirs[mode], others[0] if others else None, copying
        )
        differences += _differences(evidence)
    return Comparison(runs, differences)


def _differences(e: Evidence) -> list[Difference]:
    ours, theirs = e.ours, e.theirs
    if ours.verdict == "unsupported":
        return []
    if ours.verdict != theirs.verdict:
        detail = f"copyir {ours.verdict} ({_first_line(ours.message)}), "
        detail += f"interpret mode {theirs.verdict}"
        detail += f" ({_first_line(theirs.message)})" if theirs.message else ""
        return [_classified(e, "verdict", detail)]
    if ours.verdict != "ok":
        return []
    found = []
    outputs = _output_difference(ours.outputs, theirs.outputs)
    if outputs:
        found.append(_classified(e, "output", outputs))
    if not ours.grid_copies and ours.events != theirs.events:
        found.append(_classified(e, "schedule", _schedule_difference(e)))
    return found


def _classified(e: Evidence, kind: str, detail: str) -> Difference:
    for divergence in KNOWN:
        if divergence.kind == kind and divergence.applies(e):
            return Difference(e.mode, kind, detail, divergence)
    return Difference(e.mode, kind, detail, None)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _output_difference(
    ours: list[np.ndarray] | None, theirs: list[np.ndarray] | None
) -> str:
    """Where two output lists first differ, bit for bit; "" if nowhere."""
    ours = [np.ascontiguousarray(np.atleast_1d(a)) for a in ours or []]
    theirs = [np.ascontiguousarray(np.atleast_1d(b)) for b in theirs or []]
    if len(ours) != len(theirs):
        return f"{len(ours)} outputs against {len(theirs)}"
    for k, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {k}: {_aval(a)} against {_aval(b)}"
        unequal = np.argwhere(~_bitwise_equal(a, b))
        if len(unequal):
            at = tuple(int(i) for i in unequal[0])
            return (
                f"output {k} differs at {len(unequal)} of {a.size} elements, "
                f"the first at {list(at)}: {a[at]!r} against {b[at]!r}"
            )
    return ""


def _aval(a: np.ndarray) -> str:
    return f"{a.dtype}{list(a.shape)}"


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the same bits, or both NaN (arrays of one shape and
    dtype, at least 1-d)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    same = a.view(np.uint8).reshape(*a.shape, -1) == b.view(np.uint8).reshape(
        *b.shape, -1
    )
    equal = same.all(axis=-1)
    if _is_float(a):
        equal |= np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return equal


def _is_float(a: np.ndarray) -> bool:
    """numpy's floats and ml_dtypes' (bfloat16 is kind `V`)."""
    return a.dtype.kind in "fc" or "float" in a.dtype.name


def _same_outputs(a: list[np.ndarray] | None, b: list[np.ndarray] | None) -> bool:
    return a is not None and b is not None and not _output_difference(a, b)


def _within_ulps(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit equal, or floats within `ULPS` of each other."""
    a, b = np.atleast_1d(a), np.atleast_1d(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not _is_float(a):
        return bool(_bitwise_equal(a, b).all())
    af, bf = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        ulp = np.abs(np.spacing(b.astype(a.dtype)).astype(np.float64))
        close = np.abs(af - bf) <= ULPS * ulp
    return bool(np.all(close | (af == bf) | (np.isnan(af) & np.isnan(bf))))


def _schedule_difference(e: Evidence) -> str:
    ours, theirs = e.ours.events, e.theirs.events
    for k, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return f"event {k}: copyir {_event(a)}, interpret mode {_event(b)}"
    k = min(len(ours), len(theirs))
    counts = f"copyir has {len(ours)} DMA events, interpret mode {len(theirs)}"
    return f"{counts} (from event {k})"


def _event(event: tuple) -> str:
    if event[0] == "start":
        _, (src, src_region), (dst, dst_region), sem = event
        return (
            f"start {src}{_region(src_region)} -> {dst}{_region(dst_region)} on {sem}"
        )
    return f"wait {event[1]} {event[2]}"


def _region(region: tuple) -> str:
    return "[" + ", ".join(f"{lo}:{hi}" for lo, hi in region) + "]"


_UNSUPPORTED = re.compile(
    "^(.*)" + re.escape(errors.PALLAS_UNSUPPORTED.split("{what}")[1].split("{")[0])
)
"""`PALLAS_UNSUPPORTED`, its `what` captured."""


def run_copyir(
    f: Callable[..., Any],
    args: Sequence[Any],
    *,
    mode: str,
    opaque_compute: bool = False,
    replay: Sequence[tuple[int, ...]] | None = None,
    adds_as_copies: bool = False,
) -> CopyIRRun:
    """`f(*args)` inside `checking(mode)`, visiting grid points in the
    order `replay` gives: its verdict, outputs and DMA events (every
    kernel's buffers and semaphores kept apart)."""
    import jax

    from copyir.backends.interpreter import dma_events
    from copyir.pallas.checking import checking

    seen = _Observed()

    def observe(kernel: ImportedKernel, stream: Any, outputs: dict) -> None:
        events = dma_events(stream, kernel.order)
        seen.events += [_tagged(event, seen.kernels) for event in events]
        seen.kernels += 1
        table = stream.instructions
        seen.adds |= bool(table["add"].any())
        seen.computes |= bool((table["op"] == COMPUTE).any())
        seen.grid_copies |= kernel.grid_copies

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with checking(
                mode,
                opaque_compute=opaque_compute,
                observe=observe,
                replay=replay,
                adds_as_copies=adds_as_copies,
            ):
                out = jax.block_until_ready(f(*args))
        except CopyIRError as err:
            message = str(err)
            found = _UNSUPPORTED.match(message)
            if found:
                return CopyIRRun("unsupported", None, [], message, found.group(1))
            return CopyIRRun(_verdict(message), None, [], message)
    outputs = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(out)]
    return CopyIRRun(
        "ok",
        outputs,
        canonical(seen.events),
        "",
        adds=seen.adds,
        grid_copies=seen.grid_copies,
        computes=seen.computes,
        warned=[str(w.message) for w in caught],
    )


@dataclass
class _Observed:
    """What the kernels of one copyir run showed."""

    events: list[tuple] = field(default_factory=list)
    kernels: int = 0
    adds: bool = False
    grid_copies: bool = False
    computes: bool = False


def _tagged(event: tuple, kernel: int) -> tuple:
    """An event whose buffers and semaphores are told apart per kernel."""
    if event[0] == "start":
        _, ((src_space, src), src_region), ((dst_space, dst), dst_region), sem = event
        return (
            "start",
            ((src_space, (kernel, src)), src_region),
            ((dst_space, (kernel, dst)), dst_region),
            (kernel, sem),
        )
    return ("wait", (kernel, event[1]), event[2])


def _verdict(message: str) -> str:
    if _is(message, errors.RUN_RACE) or _is(message, errors.RUN_ACCESS_RACE):
        return "race"
    if _is(message, errors.RUN_UNSATISFIABLE_WAIT):
        return "hang"
    return "error"
