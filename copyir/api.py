"""The Python API: parse, verify, print (and, as they land, lower and run).

Every user error is a `CopyIRError` (a `ValueError` whose `str()` is exactly
the documented message, with `.loc` beside it); the API lets it through
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr

from copyir import errors
from copyir.cpy_parser import parse_cpy
from copyir.cpy_printer import print_cpy
from copyir.dialects.copy import KernelOp
from copyir.dialects.dma import ProgramOp
from copyir.errors import CopyIRError
from copyir.locations import loc_of
from copyir.mlir import gc_paused, parse_mlir, print_mlir

if TYPE_CHECKING:
    import numpy as np
    from xdsl.passes import ModulePass

    from copyir.stream import Stream

FORMATS = ("cpy", "mlir")


def parse(text: str, filename: str = "<input>", format: str | None = None) -> ModuleOp:
    """Parse a copy program; the format follows the file name unless given.

    `.mlir` files are the MLIR form of the copy dialect; anything else is the
    authoring syntax.
    """
    if format is None:
        format = "mlir" if filename.endswith(".mlir") else "cpy"
    if format not in FORMATS:
        raise ValueError(f"Unknown format {format!r} (expected cpy or mlir)")
    with gc_paused():
        if format == "mlir":
            module = parse_mlir(text, filename)
        else:
            module = parse_cpy(text, filename)
    if loc_of(module.location) is None:  # implicit: the file itself
        module.location = FileLineColLoc(StringAttr(filename), IntAttr(1), IntAttr(1))
    return module


def verify(module: ModuleOp, target: str = "default") -> None:
    """Raise the program's first error; return None when it is valid.

    `target` (a built-in name or a TOML file) bounds each buffer's size.
    """
    from copyir.passes.verify import verify as verify_module
    from copyir.target import get_target

    with gc_paused():
        verify_module(module, get_target(target))


def kernels(module: ModuleOp) -> list[KernelOp]:
    return [op for op in module.ops if isinstance(op, KernelOp)]


def select_kernel(module: ModuleOp, name: str | None) -> KernelOp:
    """The kernel called `name`; with no name, the file's only kernel."""
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
    raise CopyIRError(errors.NO_KERNEL.format(name=name, names=names or "none"))


def pipeline(spec: str | None = None, target: str = "default") -> list[ModulePass]:
    """Passes from a `-p` spec (`pass-a,pass-b{opt=1}`), or the lowering.

    A bad spec raises `PipelineError`, a usage error rather than a program's.
    """
    from xdsl.passes import PassPipeline
    from xdsl.utils.exceptions import ArgSpecParseError

    from copyir.passes import LOWERING, PASSES
    from copyir.passes.assign_addresses import AssignAddressesPass

    if spec is None:
        return [
            AssignAddressesPass(target=target)
            if name == "assign-addresses"
            else PASSES[name]()()
            for name in LOWERING
        ]
    try:
        return list(PassPipeline.parse_spec(PASSES, spec).passes)
    except (ValueError, ArgSpecParseError) as err:  # xDSL's own spec errors
        raise PipelineError(str(err)) from None


class PipelineError(Exception):
    """A pass pipeline that cannot be parsed: a usage error."""


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


def lower(
    module: ModuleOp, kernel: str | None = None, target: str = "default"
) -> ProgramOp:
    """The DMA program of a kernel: verify, then the default lowering.

    The caller's module is left as it was.
    """
    verify(module, target)
    chosen = select_kernel(module, kernel)
    single = ModuleOp([chosen.clone()])
    apply_passes(single, pipeline(None, target))
    return single.ops.first


def to_stream(program: ProgramOp) -> Stream:
    """The DMA program as tables (see `copyir.stream`)."""
    from copyir.stream import from_program

    return from_program(program)


def run(
    program: ModuleOp | ProgramOp | Stream,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    mode: str = "random",
    seed: int = 0,
    kernel: str | None = None,
    target: str = "default",
) -> dict[str, np.ndarray]:
    """Run a program on numpy arrays; every parameter's final value, by name.

    A copy-dialect module is verified and lowered first (`kernel` picks one
    of several); a `dma.program` or a `Stream` runs as it is. Runtime errors
    (races, unsatisfiable waits, DMAs never waited, out-of-bounds accesses,
    reads of memory nobody wrote) are `CopyIRError`s located at the source.
    The caller's arrays are never modified: inputs are copied in, and a
    parameter the program never writes comes back as a read-only view.
    """
    from copyir.backends.interpreter import run_stream
    from copyir.stream import Stream as StreamType

    if isinstance(program, ModuleOp):
        program = lower(program, kernel, target)
    if isinstance(program, ProgramOp):
        program = to_stream(program)
    if not isinstance(program, StreamType):
        raise TypeError(f"cannot run a {type(program).__name__}")
    return run_stream(program, dict(inputs or {}), mode, seed)


def to_text(
    module: ModuleOp, format: str = "cpy", debuginfo: bool | None = None
) -> str:
    """The module in one of the two textual forms.

    Locations (`loc(...)`) are printed by default in the MLIR form, so that
    origins survive a trip through `.mlir`, and on request in the authoring
    syntax.
    """
    if format == "mlir":
        return print_mlir(module, debuginfo=debuginfo is not False)
    return print_cpy(module, debuginfo=bool(debuginfo))


def dma_text(program: ProgramOp, origins: bool = True) -> str:
    """The `.dma` text of a DMA program, origins as trailing comments."""
    from copyir.stream import print_dma

    return print_dma(program, origins)
