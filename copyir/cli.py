"""The `copyir` command line: verify, opt, lower and run; import and check
Pallas kernels (`copyir.pallas.command`).

Exit status, one rule for every command:

- 0: every program is valid (with `--verify-diagnostics`: every program
  produced exactly the diagnostics its comments expect);
- 1: a program is wrong, statically or at run time (a located diagnostic);
- 2: the command line, or a file it names, is wrong: an unknown pass or
  option, an input name that matches no parameter, `--kernel` naming no
  kernel, a missing or unreadable file (an `InvocationError`);
- 3: an internal error, which is always a bug in copyir.

Every command reads a program in any form (`.cpy`, `.mlir`, `.dma`, `.npz`;
`-` is standard input, its form told by its content), takes
`--split-input-file` and `--verify-diagnostics`, and prints the warnings it
meets (`CopyIRWarning`) as located diagnostics.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import copyir
from copyir import errors
from copyir.diagnostics import Diagnostic, format_diagnostic
from copyir.errors import CopyIRError, CopyIRWarning, InvocationError
from copyir.machine import MODES

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
INPUT_FORMATS = ("cpy", "mlir", "dma", "npz")

T = TypeVar("T")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _argument_parser()
    args = parser.parse_args(argv)
    args.sources = {}
    try:
        return args.run(args)
    except InvocationError as err:  # before CopyIRError: it is one
        _print(Diagnostic.of(err), args.sources)
        return EXIT_USAGE
    except CopyIRError as err:
        _print(Diagnostic.of(err), args.sources)
        return EXIT_INVALID
    except MemoryError:  # numpy's too: a program too large, not a bug
        from copyir.limits import out_of_memory

        _print(Diagnostic.of(out_of_memory()), args.sources)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as err:  # the single catch-all: anything here is a bug
        print(
            f"copyir: internal error: {type(err).__name__}: {err}\n"
            "This is a bug in copyir; please report it with the input.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def command() -> int:
    """`copyir` as a process (the script and `python -m copyir`): `main`,
    then every object left to the operating system. Python's collection at
    exit would walk and free each object of the IR the command built, a
    cost that grows with the program (0.5 s for 10,000 DMAs) and buys
    nothing: the process is ending."""
    status = main()
    gc.freeze()
    return status


# -- arguments ----------------------------------------------------------------


def _argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="copyir",
        description="Write, check, lower and run TPU-style DMA copy programs.",
        epilog="Exit status: 0 valid; 1 a program is wrong; 2 the command line "
        "or a file it names is wrong; 3 internal error.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"copyir {copyir.__version__}",
        help="print copyir's version and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _verify_parser(commands)
    _opt_parser(commands)
    _lower_parser(commands)
    _run_parser(commands)
    from copyir.pallas.command import add_parsers

    add_parsers(commands, _seed)
    return parser


def _verify_parser(commands) -> None:
    verify = commands.add_parser(
        "verify",
        help="check programs and report the first error of each",
        description="Check copy programs; print `file:line:col: error: ...` for "
        "the first error of each invalid one. A lowered stream (.dma, .npz, or "
        "MLIR holding a dma.program) is read and validated.",
    )
    verify.add_argument("files", nargs="+", metavar="FILE", help="`-` reads stdin")
    _add_input_options(verify)
    _add_target_option(verify)
    _add_emit_options(verify)
    _add_diagnostic_options(verify)
    verify.add_argument(
        "--protocol",
        action="store_true",
        help="also lower the program and check its DMA protocol without data "
        "(races, unsatisfiable waits, DMAs never waited, reads of scratch "
        "nobody wrote; parameters count as inputs)",
    )
    verify.set_defaults(run=_verify_command)


def _opt_parser(commands) -> None:
    opt = commands.add_parser(
        "opt",
        help="run passes and print the IR (like xdsl-opt and mlir-opt)",
        description="Verify a program, run a pass pipeline on it, and print the "
        "result. Without -p, runs the lowering that `copyir lower` runs.",
    )
    opt.add_argument(
        "file", nargs="?", default="-", metavar="FILE", help="default: stdin"
    )
    opt.add_argument(
        "-p",
        "--passes",
        metavar="PIPELINE",
        help="passes to run, such as `expand-pytree-copies,assign-addresses"
        "{target=small}`",
    )
    opt.add_argument(
        "--list-passes",
        action="store_true",
        help="list the passes with their options and exit",
    )
    opt.add_argument(
        "--print-ir-before-all",
        action="store_true",
        help="print the IR to stderr before each pass",
    )
    opt.add_argument(
        "--print-ir-after-all",
        action="store_true",
        help="print the IR to stderr after each pass",
    )
    _add_input_options(opt)
    _add_target_option(opt)
    _add_emit_options(opt, default="mlir")
    _add_diagnostic_options(opt)
    opt.set_defaults(run=_opt)


def _lower_parser(commands) -> None:
    lower = commands.add_parser(
        "lower",
        help="lower a program to its DMA instruction stream",
        description="Verify a kernel and lower it to its DMA stream, loops kept "
        "as loops: text (.dma, origins as trailing comments) or binary (.npz).",
    )
    lower.add_argument(
        "file", nargs="?", default="-", metavar="FILE", help="default: stdin"
    )
    lower.add_argument(
        "-o", "--output", help="write the stream here (default or `-`: stdout)"
    )
    lower.add_argument(
        "--format",
        choices=("text", "npz"),
        help="the stream's form (default: npz for a .npz output, else text)",
    )
    lower.add_argument(
        "--no-origins",
        action="store_true",
        help="leave out the trailing origin comments of the text form",
    )
    _add_input_options(lower)
    _add_target_option(lower)
    _add_diagnostic_options(lower)
    lower.set_defaults(run=_lower_command)


def _run_parser(commands) -> None:
    run = commands.add_parser(
        "run",
        help="run a program on numpy arrays, checking the DMA protocol",
        description="Verify, lower and execute a program (or execute a lowered "
        "stream, .dma or .npz) on the numpy interpreter, which reports races, "
        "waits that can never finish, DMAs never waited, out-of-bounds accesses "
        "and reads of memory nobody wrote.",
    )
    run.add_argument(
        "file", metavar="PROGRAM", help=".cpy, .mlir, .dma or .npz; `-` reads stdin"
    )
    run.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy | FILE.npz",
        help="bind a parameter to an array; an .npz binds each of its keys",
    )
    run.add_argument(
        "--output",
        metavar="OUT.npz",
        help="write the parameters' final values to one .npz (`-`: stdout)",
    )
    run.add_argument(
        "--output-params",
        choices=("all", "written"),
        default="all",
        help="which parameters --output holds: all of them (default), or only "
        "those some DMA of the program writes",
    )
    run.add_argument(
        "--mode",
        choices=MODES,
        default="random",
        help="when DMAs complete inside their in-flight window (default: random)",
    )
    run.add_argument(
        "--seed",
        type=_seed,
        default=0,
        help="for random mode and --fill-inputs random: 0 to 2**63-1 (default 0)",
    )
    run.add_argument(
        "--trace",
        action="store_true",
        help="print every event of the stream in program order (starts, waits, "
        "computations, invalidations) with its loop iteration, before running",
    )
    run.add_argument(
        "--fill-inputs",
        choices=("zeros", "iota", "random"),
        help="bind every parameter not given by --input to zeros, to 0, 1, 2, "
        "... (cast to its dtype), or to random values (from --seed)",
    )
    run.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="FILE",
        help="a source file whose lines diagnostics may show (such as the "
        "program a stream was lowered from)",
    )
    _add_input_options(run)
    _add_target_option(run)
    _add_diagnostic_options(run)
    run.set_defaults(run=_run_command)


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", metavar="NAME", help="use this kernel of the file")
    parser.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        help="the program's form (default: from the file name, else its content)",
    )


def _add_target_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        default="default",
        metavar="NAME",
        help="memory capacities and alignments: default, small, or a .toml file; "
        "given to every pass that takes a target unless -p sets it",
    )


def _add_emit_options(parser: argparse.ArgumentParser, default=None) -> None:
    parser.add_argument(
        "--emit",
        choices=("cpy", "mlir"),
        default=default,
        help="print the IR in the authoring syntax or as MLIR (a lowered "
        "program prints its dma.program: the .dma text for cpy)",
    )
    parser.add_argument(
        "--debuginfo",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print loc(...) on every op (default: on for mlir, off for cpy)",
    )
    parser.add_argument(
        "-o", "--output", help="write the printed IR here (`-`: stdout)"
    )


def _add_diagnostic_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verify-diagnostics",
        action="store_true",
        help="check the diagnostics against `expected-error {{...}}` comments "
        "(also expected-warning, -remark and -note)",
    )
    parser.add_argument(
        "--split-input-file",
        action="store_true",
        help="handle each part between `# -----` (or `// -----`) lines on its own",
    )


def _seed(text: str) -> int:
    """A seed numpy and the stream's tables can hold."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(errors.BAD_SEED.format(value=text[:40]))
    return value


# -- the programs a command reads ---------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """One program to handle: a file, or one part of it (--split-input-file)."""

    name: str
    format: str
    text: str = ""  # the part's text; a binary stream has `data` instead
    data: bytes = b""
    error: CopyIRError | None = None  # text that is not UTF-8

    def load(self):
        """The program, parsed (its syntax errors raise here)."""
        from copyir.api import parse_program, read_program

        if self.error is not None:
            raise self.error
        if self.format == "npz":
            return read_program(self.data, self.name, self.format)
        return parse_program(self.text, self.name, self.format)


def _units(args: argparse.Namespace, paths: Iterable[str]) -> list[_Unit]:
    """Every program of the named files, all read before any work starts."""
    from copyir.expectations import split_chunks
    from copyir.files import decode_utf8, detect_format, read_bytes

    units = []
    for data, name in [read_bytes(path) for path in paths]:
        format = detect_format(name, data, args.input_format)
        if format == "npz":
            units.append(_Unit(name, format, data=data))
            continue
        try:
            text = decode_utf8(data, name)
        except CopyIRError as err:
            units.append(_Unit(name, format, error=err))
            continue
        args.sources[name] = text
        units += [
            _Unit(name, format, chunk.text)
            for chunk in split_chunks(text, args.split_input_file)
        ]
    return units


def _checked_program(unit: _Unit, args: argparse.Namespace, check: bool = True):
    """The unit's program, reduced to `--kernel` if given, and checked
    (unless the caller lowers it, which checks): a copy module is verified,
    a lowered one validated as a stream."""
    from xdsl.dialects.builtin import ModuleOp

    from copyir.api import check_kernel

    program = unit.load()
    if isinstance(program, ModuleOp):
        if args.kernel is not None:
            chosen = copyir.select_kernel(program, args.kernel)
            for other in list(program.ops):
                if other is not chosen:
                    other.detach()
                    other.erase()
    else:
        check_kernel(program, args.kernel)
    if check:
        copyir.verify(program, args.target)
    return program


def _each(
    args: argparse.Namespace, units: Iterable[_Unit], work: Callable[[_Unit], T]
) -> tuple[int, list[T]]:
    """Do `work` on each unit, reporting (or, with --verify-diagnostics,
    matching) its diagnostics: the exit status and the results of the units
    that succeeded."""
    status, results = EXIT_OK, []
    for unit in units:
        result, error, warned = _attempt(lambda unit=unit: work(unit))
        if args.verify_diagnostics:
            problems = _mismatches(unit, error, warned)
            for problem in problems:
                _print(problem, args.sources)
            status = max(status, EXIT_INVALID if problems else EXIT_OK)
        else:
            for warning in warned:
                _print(Diagnostic.of(warning), args.sources)
            if error is not None:
                _print(Diagnostic.of(error), args.sources)
                status = EXIT_INVALID
        if error is None:
            results.append(result)
    return status, results


def _attempt(
    work: Callable[[], T],
) -> tuple[T | None, CopyIRError | None, list[CopyIRWarning]]:
    """Run `work`, keeping its program error and its warnings; an
    `InvocationError` (the command line is wrong) goes through."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CopyIRWarning)
        try:
            result, error = work(), None
        except InvocationError:
            raise
        except CopyIRError as err:
            result, error = None, err
    ours = []
    for warning in caught:
        if isinstance(warning.message, CopyIRWarning):
            ours.append(warning.message)
        else:  # not ours: shown as Python shows it
            warnings.showwarning(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    return result, error, ours


def _mismatches(
    unit: _Unit, error: CopyIRError | None, warned: Sequence[CopyIRWarning]
) -> list[Diagnostic]:
    """What --verify-diagnostics reports for one unit (a malformed
    expectation is reported too)."""
    from copyir.expectations import check, expectations, produced

    try:
        expected = expectations(unit.text, unit.name)
    except CopyIRError as err:
        return [Diagnostic.of(err)]
    return check(produced(error, warned), expected, unit.name)


def _print(diagnostic: Diagnostic, sources: dict[str, str]) -> None:
    print(format_diagnostic(diagnostic, sources), file=sys.stderr)


# -- commands -----------------------------------------------------------------


def _verify_command(args: argparse.Namespace) -> int:
    if args.output and args.emit is None:
        raise InvocationError(errors.NEEDS_EMIT)
    if args.output and len(args.files) > 1:
        raise InvocationError(errors.ONE_INPUT_FOR_OUTPUT)
    _check_target(args.target)
    _check_output_path(args, args.output)
    units = _units(args, args.files)

    def work(unit: _Unit) -> str:
        program = _checked_program(unit, args)
        if args.protocol:
            from copyir.api import check_protocol

            check_protocol(program, args.kernel, args.target)
        return copyir.to_text(program, args.emit, args.debuginfo) if args.emit else ""

    status, texts = _each(args, units, work)
    if args.emit:
        separator = "// -----\n" if args.emit == "mlir" else "# -----\n"
        _write(args.output, texts, separator)
    return status


def _opt(args: argparse.Namespace) -> int:
    if args.list_passes:
        _list_passes()
        return EXIT_OK
    from xdsl.dialects.builtin import ModuleOp

    from copyir.api import apply_passes, pipeline
    from copyir.stream import Stream, to_program

    _check_target(args.target)
    passes = pipeline(args.passes, args.target)
    _check_output_path(args, args.output, passes)
    units = _units(args, [args.file])

    def observe(when: str, module_pass, ir) -> None:
        if (when == "before" and args.print_ir_before_all) or (
            when == "after" and args.print_ir_after_all
        ):
            title = f"IR Dump {when.capitalize()} {module_pass.name}"
            print(f"// -----// {title} //----- //", file=sys.stderr)
            print(copyir.to_text(ir, args.emit, args.debuginfo), file=sys.stderr)

    def work(unit: _Unit) -> str:
        program = _checked_program(unit, args)
        if isinstance(program, Stream):
            program = to_program(program)
        module = program if isinstance(program, ModuleOp) else ModuleOp([program])
        apply_passes(module, passes, observe)
        return copyir.to_text(module, args.emit, args.debuginfo)

    status, texts = _each(args, units, work)
    _write(args.output, texts, "// -----\n" if args.emit == "mlir" else "# -----\n")
    return status


def _list_passes() -> None:
    """Each pass, its one-line description, and its options."""
    from copyir.passes import PASSES, description, options

    width = max(map(len, PASSES))
    for name in PASSES:
        print(f"{name:<{width}}  {description(name)}")
        for option in options(name):
            print(f"{'':<{width}}    {option.name}: {option.type} = {option.default}")
            if option.doc:
                print(f"{'':<{width}}      {option.doc}")


def _lower_command(args: argparse.Namespace) -> int:
    from copyir.stream import save_npz

    npz_output = bool(args.output) and args.output.endswith(".npz")
    form = args.format or ("npz" if npz_output else "text")
    if form == "npz" and not args.output:
        raise InvocationError(errors.NPZ_NEEDS_OUTPUT)
    if form == "npz" and args.split_input_file:
        raise InvocationError(
            errors.ONE_PROGRAM_FOR_OUTPUT.format(option="--format npz")
        )
    _check_target(args.target)
    _check_output_path(args, args.output)
    units = _units(args, [args.file])

    def work(unit: _Unit):
        program = _checked_program(unit, args, check=False)
        program = copyir.lower(program, args.kernel, args.target, in_place=True)
        if form == "npz":
            return lambda out: save_npz(copyir.to_stream(program), out)
        return copyir.dma_text(program, origins=not args.no_origins)

    status, outputs = _each(args, units, work)
    if form == "npz":
        if outputs:
            from copyir.files import write_output

            write_output(args.output, outputs[0])
    else:
        _write(args.output, cast(list[str], outputs), "// -----\n")  # .dma texts
    return status


def _run_command(args: argparse.Namespace) -> int:
    from copyir.files import read_source, save_outputs, written_parameters

    if args.output not in (None, "-") and not args.output.endswith(".npz"):
        raise InvocationError(errors.OUTPUT_NOT_NPZ)
    if args.output and args.split_input_file:
        raise InvocationError(errors.ONE_PROGRAM_FOR_OUTPUT.format(option="--output"))
    _check_target(args.target)
    _check_output_path(args, args.output)
    for path in args.source:
        text, name = read_source(path)
        args.sources[name] = text
    units = _units(args, [args.file])
    if args.verify_diagnostics:
        return _run_expecting(args, units)

    def work(unit: _Unit):
        from copyir.backends.interpreter import run_stream, trace_lines

        stream, inputs = _stream_and_inputs(unit, args)
        if args.trace:
            out = sys.stderr if args.output == "-" else sys.stdout
            out.write("".join(f"{line}\n" for line in trace_lines(stream)))
        return stream, run_stream(stream, inputs, args.mode, args.seed)

    status, results = _each(args, units, work)
    for stream, outputs in results:
        if args.output:
            if args.output_params == "written":
                written = written_parameters(stream)
                outputs = {k: v for k, v in outputs.items() if k in written}
            save_outputs(args.output, outputs)
            continue
        starts = executed_dmas(stream)
        print(f"ran {stream.kernel}: {starts} DMAs, {args.mode} mode; final values:")
        for name, value in outputs.items():
            print(f"  {name}: {value.dtype.name}{list(value.shape)}")
    return status


def executed_dmas(stream) -> int:
    """How many DMAs a run starts, its loops expanded."""
    from copyir.expand import executions
    from copyir.stream import START

    return executions(stream, START)


def _stream_and_inputs(unit: _Unit, args: argparse.Namespace):
    """The unit's stream (lowered here, or read as lowered) and its inputs,
    each checked against its parameter before its data is read."""
    from xdsl.dialects.builtin import ModuleOp

    from copyir.api import lowered_stream
    from copyir.backends.interpreter import fill_inputs
    from copyir.files import load_inputs, parameters
    from copyir.mlir import gc_paused

    with gc_paused():  # one pause from text to stream, as `copyir.run`
        program = _checked_program(unit, args, check=False)
        if isinstance(program, ModuleOp):
            stream = lowered_stream(program, args.kernel, args.target, in_place=True)
        else:
            copyir.verify(program)
            stream = copyir.to_stream(program)
    inputs = load_inputs(args.input, parameters(stream), stream.kernel)
    if args.fill_inputs:
        inputs = fill_inputs(stream, inputs, args.fill_inputs, args.seed)
    return stream, inputs


def _run_expecting(args: argparse.Namespace, units: list[_Unit]) -> int:
    """--verify-diagnostics for run: the diagnostics must be the ones the
    program's comments expect, in every completion mode."""
    from copyir.backends.interpreter import run_stream

    status = EXIT_OK
    for unit in units:

        def work(mode: str, unit: _Unit = unit) -> None:
            stream, inputs = _stream_and_inputs(unit, args)
            run_stream(stream, inputs, mode, args.seed)

        by_mode = {}
        for mode in MODES:
            _, error, warned = _attempt(lambda mode=mode: work(mode))
            by_mode[mode] = _mismatches(unit, error, warned)
        problems = by_mode[MODES[0]]
        if any(p != problems for p in by_mode.values()):
            problems = [
                Diagnostic("error", f"{p.message} (in {mode} mode)", p.loc, p.notes)
                for mode, found in by_mode.items()
                for p in found
            ]
        for problem in problems:
            _print(problem, args.sources)
        status = max(status, EXIT_INVALID if problems else EXIT_OK)
    return status


# -- helpers ------------------------------------------------------------------


def _check_target(name: str) -> None:
    """A target that cannot be had is found before any work (exit 2)."""
    from copyir.target import get_target

    get_target(name)


def _check_output_path(args: argparse.Namespace, output: str | None, passes=()) -> None:
    """Before any work: the output can be written and is no file the
    command reads."""
    from copyir.files import check_not_input, check_output

    check_not_input(output, _read_paths(args, passes))
    check_output(output)


def _read_paths(args: argparse.Namespace, passes=()) -> list[str]:
    """Every file the command reads: programs, inputs, sources, targets
    (--target and any pass option)."""
    paths = [*getattr(args, "files", [])]
    if getattr(args, "file", None):
        paths.append(args.file)
    for spec in getattr(args, "input", []):
        _, sep, path = spec.partition("=")
        paths.append(path if sep else spec)
    paths += getattr(args, "source", [])
    targets = [args.target, *(getattr(p, "target", None) for p in passes)]
    paths += [t for t in targets if isinstance(t, str) and t.endswith(".toml")]
    return [path for path in paths if path]


def _write(output: str | None, texts: list[str], separator: str) -> None:
    """The printed programs, one after the other, to the output (or stdout)."""
    from copyir.files import write_output

    if texts:
        write_output(output, separator.join(texts))


if __name__ == "__main__":
    sys.exit(command())
