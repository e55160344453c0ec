"""The Python API: parse, verify, print (and, as they land, lower and run).

Every user error is a `CopyIRError` (a `ValueError` whose `str()` is exactly
the documented message, with `.loc` beside it); the API lets it through
unchanged.
"""

from __future__ import annotations

import contextlib
import gc

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr

from copyir import errors
from copyir.cpy_parser import parse_cpy
from copyir.cpy_printer import print_cpy
from copyir.dialects.copy import KernelOp, loc_of
from copyir.errors import CopyIRError, Loc
from copyir.mlir import parse_mlir, print_mlir

FORMATS = ("cpy", "mlir")


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector while building or walking IR.

    IR is millions of small linked objects; collections triggered by their
    allocation cost more than half of a large parse. Nothing cyclic is freed
    late: the collector runs again on exit.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse(text: str, filename: str = "<input>", format: str | None = None) -> ModuleOp:
    """Parse a copy program; the format follows the file name unless given.

    `.mlir` files are the MLIR form of the copy dialect; anything else is the
    authoring syntax.
    """
    if format is None:
        format = "mlir" if filename.endswith(".mlir") else "cpy"
    if format not in FORMATS:
        raise ValueError(f"Unknown format {format!r} (expected cpy or mlir)")
    with _gc_paused():
        if format == "mlir":
            module = parse_mlir(text, filename)
        else:
            module = parse_cpy(text, filename)
    if loc_of(module.location) is None:  # implicit: the file itself
        module.location = FileLineColLoc(StringAttr(filename), IntAttr(1), IntAttr(1))
    return module


def verify(module: ModuleOp) -> None:
    """Raise the program's first error; return None when it is valid."""
    from copyir.passes.verify import verify as verify_module

    with _gc_paused():
        verify_module(module)


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
            raise CopyIRError(errors.NO_KERNELS, _module_loc(module))
        raise CopyIRError(errors.SEVERAL_KERNELS.format(names=names))
    for kernel in found:
        if kernel.kernel_name == name:
            return kernel
    raise CopyIRError(errors.NO_KERNEL.format(name=name, names=names or "none"))


def _module_loc(module: ModuleOp) -> Loc | None:
    return loc_of(module.location)


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
