"""The Python API: parse, verify, print, lower and run.

Every user error is a `CopyIRError` (a `ValueError` whose `str()` is exactly
the documented message, with `.loc` beside it); the API lets it through
unchanged. `verify`, `lower` and `run` take a program in any form: a module,
source text (a `str`, its form told by its content), or a file (a
`pathlib.Path`, its form told by its suffix, then its content); `run` (and
`verify` and `lower`) also a lowered `dma.program` or `Stream`.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Union

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr

from copyir import errors
from copyir.dialects.copy import KernelOp
from copyir.dialects.dma import ProgramOp
from copyir.errors import CopyIRError, InvocationError
from copyir.locations import loc_of
from copyir.mlir import gc_paused
from copyir.passes import PipelineError  # noqa: F401  (pipeline() raises it)

if TYPE_CHECKING:
    import numpy as np
    from xdsl.passes import ModulePass

    from copyir.stream import Stream

FORMATS = ("cpy", "mlir")
"""The forms `parse` reads: the authoring syntax and the MLIR form."""
TEXT_FORMATS = ("cpy", "mlir", "dma")
"""The forms `to_text` prints."""

LoadedProgram = Union[ModuleOp, ProgramOp, "Stream"]
"""A program in memory: a copy-dialect module, or a lowered one."""


def _memory_is_the_programs(function: Callable) -> Callable:
    """A `MemoryError` (numpy's too) becomes the `CopyIRError` that says the
    program needs more memory than there is and names copyir's limits: a
    program too large for the machine is not a bug in copyir."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except MemoryError:
            from copyir.limits import out_of_memory

            raise out_of_memory() from None

    return wrapper


def parse(text: str, filename: str = "<input>", format: str | None = None) -> ModuleOp:
    """Parse a copy program; the format follows the file name unless given.

    `.mlir` files are the MLIR form of the copy dialect; anything else is the
    authoring syntax.
    """
    if format is None:
        format = "mlir" if filename.endswith(".mlir") else "cpy"
    if format not in FORMATS:
        raise ValueError(
            errors.UNKNOWN_FORMAT.format(format=format, formats="cpy or mlir")
        )
    with gc_paused():
        if format == "mlir":
            from copyir.mlir import parse_mlir

            module = parse_mlir(text, filename)
        else:
            from copyir.cpy.parser import parse_cpy

            module = parse_cpy(text, filename)
    if loc_of(module.location) is None:  # implicit: the file itself
        module.location = FileLineColLoc(StringAttr(filename), IntAttr(1), IntAttr(1))
    return module


def parse_program(text: str, filename: str, format: str) -> ModuleOp | Stream:
    """A program's text in a known form (`cpy`, `mlir` or `dma`).

    MLIR text that holds a `dma.program` (what `opt` prints after
    `convert-copy-to-dma`, with or without its module) is read as a stream,
    each instruction remembering its line for errors in its fields.
    """
    if format != "dma":
        module = parse(text, filename, format)
        if _lowered(module) is None:
            return module
    from copyir.stream import read_dma

    return read_dma(text, filename)


def read_program(
    data: bytes, name: str, format: str | None = None
) -> ModuleOp | ProgramOp | Stream:
    """A program from a file's bytes, its form given or detected (see
    `copyir.files.detect_format`)."""
    from copyir.files import decode_utf8, detect_format

    format = detect_format(name, data, format)
    if format == "npz":
        from copyir.stream import load_npz

        return load_npz(io.BytesIO(data), name)
    return parse_program(decode_utf8(data, name), name, format)


def _program(program: object, function: str, lowered: bool = True) -> LoadedProgram:
    """Any accepted form of a program as one in memory; a wrong type is a
    `TypeError` naming what is accepted."""
    from copyir.stream import Stream

    if isinstance(program, Path):
        from copyir.files import read_bytes

        return read_program(*read_bytes(str(program)))
    if isinstance(program, str):
        return read_program(program.encode("utf-8"), "<input>")
    if isinstance(program, ModuleOp):
        return _lowered(program) or program
    if lowered and isinstance(program, ProgramOp | Stream):
        return program
    accepted = "a ModuleOp, source text (str) or a file (pathlib.Path)"
    if lowered:
        accepted = (
            "a ModuleOp, a dma.program, a Stream, source text (str) or a file "
            "(pathlib.Path)"
        )
    raise TypeError(
        errors.API_TYPE.format(
            function=function, accepted=accepted, got=type(program).__name__
        )
    )


def _lowered(module: ModuleOp) -> ProgramOp | None:
    """The `dma.program` a module holds (after `convert-copy-to-dma`); the
    first look at any module, so it also refuses a module of several
    blocks (or none), which nothing after it could read."""
    if len(module.body.blocks) != 1:
        raise CopyIRError(
            errors.MODULE_BLOCKS.format(count=len(module.body.blocks)),
            loc_of(module.location),
        )
    return next((op for op in module.ops if isinstance(op, ProgramOp)), None)


@_memory_is_the_programs
def verify(program: object, target: str = "default") -> None:
    """Raise the program's first error; return None when it is valid.

    `target` (a built-in name or a TOML file) bounds each buffer's size. A
    lowered program (`dma.program` or `Stream`) is validated as a stream.
    """
    program = _program(program, "verify")
    if not isinstance(program, ModuleOp):
        to_stream(program).validate(_name_of(program))
        return
    from copyir.passes.verify import verify as verify_module
    from copyir.target import get_target

    with gc_paused():
        verify_module(program, get_target(target))


def _name_of(program: ProgramOp | Stream) -> str | None:
    """The file a lowered program came from, for its stream errors."""
    if isinstance(program, ProgramOp):
        loc = loc_of(program.location)
        return loc.file if loc is not None else None
    return None


def kernels(module: ModuleOp) -> list[KernelOp]:
    return [op for op in module.ops if isinstance(op, KernelOp)]


def select_kernel(module: ModuleOp, name: str | None) -> KernelOp:
    """The kernel called `name`; with no name, the file's only kernel.

    Naming a kernel the file lacks is an `InvocationError` (the command line
    is wrong); a file with several kernels and no name is the program's.
    """
    found = kernels(module)
    names = ", ".join(k.kernel_name for k in found)
    if name is None:
        if len(found) == 1:
            return found[0]
        if not found:
            raise CopyIRError(errors.NO_KERNELS, loc_of(module.location))
        raise CopyIRError(errors.SEVERAL_KERNELS.format(names=names))
    for kernel in found:
        if kernel.kernel_name == name:
            return kernel
    raise InvocationError(errors.NO_KERNEL.format(name=name, names=names or "none"))


def check_kernel(program: ProgramOp | Stream, name: str | None) -> None:
    """A lowered program holds one kernel: `name`, if given, must be it."""
    kernel = program.sym_name.data if isinstance(program, ProgramOp) else program.kernel
    if name is not None and name != kernel:
        raise InvocationError(errors.NO_KERNEL.format(name=name, names=kernel))


def pipeline(spec: str | None = None, target: str = "default") -> list[ModulePass]:
    """Passes from a `-p` spec (`pass-a,pass-b{opt=1}`), or the lowering.

    Every pass with a `target` option gets `target` unless the spec sets it.
    A bad spec raises `PipelineError`, an `InvocationError`.
    """
    from copyir.passes import LOWERING, parse_pipeline

    return parse_pipeline(",".join(LOWERING) if spec is None else spec, target)


def apply_passes(
    module: ModuleOp,
    passes: list[ModulePass],
    observe: Callable[[str, ModulePass, ModuleOp], None] | None = None,
) -> None:
    """Run passes in order on a verified module; `observe(when, pass, module)`
    sees the IR "before" and "after" each one."""
    from copyir.mlir import context

    with gc_paused():
        for module_pass in passes:
            if observe is not None:
                observe("before", module_pass, module)
            module_pass.apply(context(), module)
            if observe is not None:
                observe("after", module_pass, module)


@_memory_is_the_programs
def lower(
    program: object,
    kernel: str | None = None,
    target: str = "default",
    *,
    in_place: bool = False,
) -> ProgramOp:
    """The DMA program of a kernel: verify, then the default lowering.

    The caller's module is left as it was, unless `in_place` (then it is
    lowered where it is, which saves copying a large program that the
    caller will not use again). An already lowered program is returned as
    it is (a `Stream` as its `dma.program`), once validated.
    """
    in_place = in_place or not isinstance(program, ModuleOp | ProgramOp)
    program = _program(program, "lower")
    if not isinstance(program, ModuleOp):
        check_kernel(program, kernel)
        verify(program)
        if isinstance(program, ProgramOp):
            return program
        from copyir.stream import to_program

        return to_program(program)
    verify(program, target)
    chosen = select_kernel(program, kernel)
    if in_place:
        chosen.detach()
    single = ModuleOp([chosen if in_place else chosen.clone()])
    apply_passes(single, pipeline(None, target))
    lowered = single.ops.first
    assert isinstance(lowered, ProgramOp)  # what the lowering ends in
    return lowered


@_memory_is_the_programs
def check_protocol(
    program: object, kernel: str | None = None, target: str = "default"
) -> None:
    """The data-free protocol check: lower the program (unless it is a
    stream) and decide its DMA protocol without arrays, raising its first
    race, unsatisfiable wait, DMA never waited or read of scratch nobody
    wrote. Parameters count as inputs. A stream is checked as it is, never
    rebuilt into ops first: its fields are validated before anything reads
    them."""
    from copyir.backends.interpreter import check_stream

    program = _program(program, "check_protocol")
    if isinstance(program, ModuleOp):
        check_stream(lowered_stream(program, kernel, target))
        return
    check_kernel(program, kernel)
    stream = to_stream(program)
    stream.source = stream.source or _name_of(program)
    check_stream(stream)


def lowered_stream(
    module: ModuleOp,
    kernel: str | None = None,
    target: str = "default",
    *,
    in_place: bool = False,
) -> Stream:
    """The stream of a kernel, verified and lowered here (see `lower`).

    The stream is marked as copyir's own (`Stream.lowered`): a field of it
    that the validator refuses is an `InternalError`, copyir's bug, not a
    `Malformed DMA stream` as in a stream read or built by hand.
    """
    from copyir.stream import from_program

    return from_program(lower(module, kernel, target, in_place=in_place), lowered=True)


def to_stream(program: ProgramOp | Stream) -> Stream:
    """The DMA program as tables (see `copyir.stream`)."""
    from copyir.stream import Stream, from_program

    return program if isinstance(program, Stream) else from_program(program)


@_memory_is_the_programs
def run(
    program: object,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    mode: str = "random",
    seed: int = 0,
    kernel: str | None = None,
    target: str = "default",
) -> dict[str, np.ndarray]:
    """Run a program on numpy arrays; every parameter's final value, by name.

    A copy-dialect module (or its text or file) is verified and lowered
    first (`kernel` picks one of several); a `dma.program` or a `Stream`
    runs as it is. Runtime errors (races, unsatisfiable waits, DMAs never
    waited, out-of-bounds accesses, reads of memory nobody wrote) are
    `CopyIRError`s located at the source. The caller's arrays are never
    modified: inputs are copied in, and a parameter the program never
    writes comes back as a read-only view.
    """
    from copyir.backends.interpreter import run_stream

    ours = not isinstance(program, ModuleOp)  # parsed here: ours to lower in place
    with gc_paused():  # one pause from text to stream, not one per stage
        program = _program(program, "run")
        if isinstance(program, ModuleOp):
            stream = lowered_stream(program, kernel, target, in_place=ours)
        else:
            check_kernel(program, kernel)
            stream = to_stream(program)
    return run_stream(stream, dict(inputs or {}), mode, seed)


def to_text(
    program: LoadedProgram, format: str = "cpy", debuginfo: bool | None = None
) -> str:
    """The program in one of its textual forms: `cpy`, `mlir` or `dma`.

    Locations (`loc(...)`) are printed by default in the MLIR form, so that
    origins survive a trip through `.mlir`, and on request in the authoring
    syntax. A `dma.program` (or a `Stream`, validated, then printed as its
    `dma.program`) prints as its `.dma` text in the `cpy` and `dma` forms.
    """
    if format not in TEXT_FORMATS:
        raise ValueError(
            errors.UNKNOWN_FORMAT.format(format=format, formats="cpy, mlir or dma")
        )
    if not isinstance(program, ModuleOp | ProgramOp):
        from copyir.stream import to_program

        program.validate()  # a hand-made table is read only once checked
        program = to_program(program)
    if format == "mlir":
        from copyir.mlir import print_mlir

        return print_mlir(program, debuginfo=debuginfo is not False)
    lowered = program if isinstance(program, ProgramOp) else _lowered(program)
    if format == "dma" or (lowered is not None and program is lowered):
        if lowered is None:
            raise ValueError(errors.DMA_FORM_NEEDS_PROGRAM)
        return dma_text(lowered)
    from copyir.cpy.printer import print_cpy

    assert isinstance(program, ModuleOp)  # a ProgramOp is printed as .dma above
    return print_cpy(program, debuginfo=bool(debuginfo))


def dma_text(program: ProgramOp, origins: bool = True) -> str:
    """The `.dma` text of a DMA program, origins as trailing comments."""
    from copyir.stream import print_dma

    return print_dma(program, origins)
