"""The `.dma` text: the dma dialect's MLIR form, origins as trailing comments."""

from __future__ import annotations

import io
import re

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.printer import Printer

from copyir.dialects import dma
from copyir.errors import CopyIRError, Loc
from copyir.locations import detail_of, loc_of, with_detail
from copyir.stream.model import Stream
from copyir.stream.program import from_program

_ORIGIN = re.compile(
    r"//\s*(?P<file>.+?):(?P<line>\d{1,9}):(?P<col>\d{1,9})(?: (?P<detail>.*))?$"
)


def print_dma(program: dma.ProgramOp, origins: bool = True) -> str:
    """The `.dma` text: one line per buffer and instruction, origins trailing,
    loop bodies indented."""
    out = io.StringIO()
    out.write(
        f"// copyir DMA stream: kernel {program.sym_name.data}, "
        f"target {program.target.data}\n"
    )
    out.write(
        f'dma.program "{program.sym_name.data}" target "{program.target.data}" '
        f"semaphores {program.semaphores.value.data} {{\n"
    )
    ops = [op for block in program.body.blocks for op in block.ops]
    _print_ops(out, Printer(stream=out), ops, "  ", origins)
    out.write("}\n")
    return out.getvalue()


def _print_ops(out, printer: Printer, ops, indent: str, origins: bool) -> None:
    for op in ops:
        if isinstance(op, dma.LoopOp):
            parallel = " parallel" if op.parallel is not None else ""
            out.write(
                f'{indent}dma.loop "{op.iv_name.data}" '
                f"{op.trip_count.value.data}{parallel} {{\n"
            )
            inner = [child for block in op.body.blocks for child in block.ops]
            _print_ops(out, printer, inner, indent + "  ", origins)
            out.write(f"{indent}}}\n")
            continue
        line = io.StringIO()
        printer.stream = line
        printer.print_op(op)
        out.write(indent + line.getvalue())
        loc = loc_of(op.location)
        if origins and loc is not None and not isinstance(op, dma.SemaphoreDeclOp):
            detail = detail_of(op.location)
            out.write(f"  // {loc}{' ' + detail if detail else ''}")
        out.write("\n")


def parse_dma(text: str, filename: str = "<input>") -> dma.ProgramOp:
    """Read the `.dma` text; trailing `// file:line:col note` comments become
    the ops' locations again."""
    program, _ = _parse_dma(text, filename)
    return program


def read_dma(text: str, filename: str = "<input>") -> Stream:
    """The stream of a `.dma` text, remembering where each instruction is
    written so that a malformed field is reported at its line."""
    program, written = _parse_dma(text, filename)
    stream = from_program(program, written)
    stream.source = filename
    return stream


def _parse_dma(
    text: str, filename: str
) -> tuple[dma.ProgramOp, dict[Operation, Loc | None]]:
    from copyir.mlir import parse_mlir

    module: ModuleOp = parse_mlir(text, filename)
    programs = [op for op in module.ops if isinstance(op, dma.ProgramOp)]
    if len(programs) != 1 or len(list(module.ops)) != 1:
        raise CopyIRError(
            "A .dma file holds exactly one dma.program", Loc(filename, 1, 1)
        )
    program = programs[0]
    lines = text.splitlines()
    written = {}
    for op in program.walk():
        if op is program or isinstance(op, dma.LoopOp):
            continue
        loc = loc_of(op.location)
        written[op] = loc
        if loc is None or loc.file != filename or not 1 <= loc.line <= len(lines):
            continue
        line = lines[loc.line - 1]
        comment = line.find("//")
        if comment < 0:
            continue
        match = _ORIGIN.match(line[comment:])
        if match is None:
            continue
        location = FileLineColLoc(
            StringAttr(match["file"]),
            IntAttr(int(match["line"])),
            IntAttr(int(match["col"])),
        )
        op.location = (
            with_detail(location, match["detail"]) if match["detail"] else location
        )
    program.detach()
    return program, written
