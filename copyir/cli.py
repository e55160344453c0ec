"""The `copyir` command line: verify, opt, lower and run.

Exit status: 0 on success, 1 when a program is invalid (with a located
diagnostic), 2 for a usage error or an unreadable file, 3 for an internal
error, which is always a bug in copyir.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence

import copyir
from copyir.api import PipelineError
from copyir.diagnostics import format_error
from copyir.errors import CopyIRError
from copyir.expectations import check, expectations, split_chunks
from copyir.files import FileError, read_source, write_atomic

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """A mistake in how copyir was called (exit status 2)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _argument_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except CopyIRError as err:
        print(format_error(err, getattr(args, "sources", {})), file=sys.stderr)
        return EXIT_INVALID
    except (UsageError, FileError, PipelineError) as err:
        print(f"copyir: error: {err}", file=sys.stderr)
        return EXIT_USAGE
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


# -- arguments ----------------------------------------------------------------


def _argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="copyir",
        description="Write, check, lower and run TPU-style DMA copy programs.",
    )
    parser.add_argument(
        "--version", action="version", version=f"copyir {copyir.__version__}"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _verify_parser(commands)
    _opt_parser(commands)
    _lower_parser(commands)
    _run_parser(commands)
    return parser


def _verify_parser(commands) -> None:
    verify = commands.add_parser(
        "verify",
        help="check programs and report the first error of each",
        description="Check copy programs; print `file:line:col: error: ...` for "
        "the first error of each invalid one.",
    )
    verify.add_argument("files", nargs="+", metavar="FILE", help="`-` reads stdin")
    _add_input_options(verify)
    _add_target_option(verify)
    _add_emit_options(verify)
    verify.add_argument(
        "--verify-diagnostics",
        action="store_true",
        help="check the errors against `# expected-error {{...}}` comments",
    )
    verify.add_argument(
        "--split-input-file",
        action="store_true",
        help="check each part between `# -----` lines on its own",
    )
    verify.set_defaults(run=_verify)


def _opt_parser(commands) -> None:
    opt = commands.add_parser(
        "opt",
        help="run passes and print the IR (like xdsl-opt and mlir-opt)",
        description="Verify a program, run a pass pipeline on it, and print the "
        "result. Without -p, runs the lowering that `copyir lower` runs.",
    )
    opt.add_argument("file", nargs="?", metavar="FILE", help="`-` reads stdin")
    opt.add_argument(
        "-p",
        "--passes",
        metavar="PIPELINE",
        help="passes to run, such as `expand-pytree-copies,assign-addresses"
        "{target=small}`",
    )
    opt.add_argument(
        "--list-passes", action="store_true", help="list the passes and exit"
    )
    opt.add_argument("--print-ir-before-all", action="store_true")
    opt.add_argument("--print-ir-after-all", action="store_true")
    _add_input_options(opt)
    _add_target_option(opt)
    _add_emit_options(opt, default="mlir")
    opt.set_defaults(run=_opt)


def _lower_parser(commands) -> None:
    lower = commands.add_parser(
        "lower",
        help="lower a program to its DMA instruction stream",
        description="Verify a kernel and lower it to the flat DMA stream: text "
        "(.dma, origins as trailing comments) or binary (.npz).",
    )
    lower.add_argument("file", metavar="FILE", help="`-` reads stdin")
    lower.add_argument("-o", "--output", help="write the stream here (default: stdout)")
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
    lower.set_defaults(run=_lower)


def _run_parser(commands) -> None:
    run = commands.add_parser(
        "run",
        help="run a program on numpy arrays, checking the DMA protocol",
        description="Verify, lower and execute a program (or execute a lowered "
        "stream, .dma or .npz) on the numpy interpreter, which reports races, "
        "waits that can never finish, DMAs never waited, out-of-bounds accesses "
        "and reads of memory nobody wrote.",
    )
    run.add_argument("file", metavar="PROGRAM", help=".cpy, .mlir, .dma or .npz")
    run.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy | FILE.npz",
        help="bind a parameter to an array; an .npz binds each of its keys",
    )
    run.add_argument(
        "--output", metavar="OUT.npz", help="every parameter's final value"
    )
    run.add_argument(
        "--mode",
        choices=("random", "eager", "on_wait"),
        default="random",
        help="when DMAs complete inside their in-flight window (default: random)",
    )
    run.add_argument("--seed", type=int, default=0, help="for random mode (default 0)")
    run.add_argument(
        "--fill-inputs",
        choices=("zeros", "iota", "random"),
        help="bind every parameter not given by --input to zeros, to 0, 1, 2, "
        "... (cast to its dtype), or to random values (from --seed)",
    )
    run.add_argument(
        "--verify-diagnostics",
        action="store_true",
        help="check the run's error against `# expected-error {{...}}` comments",
    )
    _add_input_options(run)
    _add_target_option(run)
    run.set_defaults(run=_run)


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", metavar="NAME", help="use this kernel of the file")
    parser.add_argument(
        "--input-format",
        choices=("cpy", "mlir"),
        help="input syntax (default: from the file name; stdin is cpy)",
    )


def _add_target_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        default="default",
        metavar="NAME",
        help="memory capacities and alignments: default, small, or a .toml file",
    )


def _add_emit_options(parser: argparse.ArgumentParser, default=None) -> None:
    parser.add_argument(
        "--emit",
        choices=("cpy", "mlir"),
        default=default,
        help="print the IR in the authoring syntax or as MLIR",
    )
    parser.add_argument(
        "--debuginfo",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print loc(...) on every op (default: on for mlir, off for cpy)",
    )
    parser.add_argument("-o", "--output", help="write the printed IR here")


# -- commands -----------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    _check_target(args.target)
    if args.output and args.emit is None:
        raise UsageError("-o needs --emit")
    if args.output and len(args.files) > 1:
        raise UsageError("-o takes one input file")
    _refuse_overwriting_inputs(args.output, args.files)
    status = EXIT_OK
    emitted = []
    for path in args.files:
        try:
            text, name = read_source(path)
        except CopyIRError as err:
            _report(err, {})
            status = EXIT_INVALID
            continue
        for chunk in split_chunks(text, args.split_input_file):
            module, error = _checked(chunk.text, name, args)
            if args.verify_diagnostics:
                problems = check(error, expectations(chunk.text))
                for problem in problems:
                    print(f"{name}: {problem}", file=sys.stderr)
                status = max(status, EXIT_INVALID if problems else EXIT_OK)
            elif error is not None:
                _report(error, {name: text})
                status = EXIT_INVALID
            elif args.emit:
                emitted.append(copyir.to_text(module, args.emit, args.debuginfo))
    separator = "// -----\n" if args.emit == "mlir" else "# -----\n"
    _write(args.output, separator.join(emitted))
    return status


def _opt(args: argparse.Namespace) -> int:
    from copyir.passes import PASSES, description

    if args.list_passes:
        width = max(map(len, PASSES))
        for name in PASSES:
            print(f"{name:<{width}}  {description(name)}")
        return EXIT_OK
    if args.file is None:
        raise UsageError("opt needs a FILE (or --list-passes)")
    _refuse_overwriting_inputs(args.output, [args.file])
    _check_target(args.target)
    passes = copyir.api.pipeline(args.passes, args.target)
    module = _load(args.file, args)
    emit = args.emit

    def observe(when: str, module_pass, ir) -> None:
        if (when == "before" and args.print_ir_before_all) or (
            when == "after" and args.print_ir_after_all
        ):
            title = f"IR Dump {when.capitalize()} {module_pass.name}"
            print(f"// -----// {title} //----- //", file=sys.stderr)
            print(copyir.to_text(ir, emit, args.debuginfo), file=sys.stderr)

    copyir.api.apply_passes(module, passes, observe)
    _write(args.output, copyir.to_text(module, emit, args.debuginfo))
    return EXIT_OK


def _lower(args: argparse.Namespace) -> int:
    from copyir.stream import save_npz

    _refuse_overwriting_inputs(args.output, [args.file])
    form = args.format or (
        "npz" if args.output and args.output.endswith(".npz") else "text"
    )
    if form == "npz" and not args.output:
        raise UsageError("the npz form needs -o FILE")
    _check_target(args.target)
    module = _load(args.file, args, verify=False)  # lower verifies
    program = copyir.lower(module, args.kernel, args.target)
    if form == "text":
        _write(args.output, copyir.dma_text(program, origins=not args.no_origins))
        return EXIT_OK
    data = io.BytesIO()
    save_npz(copyir.to_stream(program), data)
    write_atomic(args.output, data.getvalue())
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from copyir.backends.interpreter import fill_inputs, run_stream
    from copyir.files import load_inputs, save_outputs

    if args.output and not args.output.endswith(".npz"):
        raise UsageError("--output must name an .npz file")
    _refuse_overwriting_inputs(args.output, [args.file, *args.input])
    inputs = load_inputs(args.input)
    if args.verify_diagnostics:
        return _run_expecting(args, inputs)
    stream = _stream(args)
    if args.fill_inputs:
        inputs = fill_inputs(stream, inputs, args.fill_inputs, args.seed)
    outputs = run_stream(stream, inputs, args.mode, args.seed)
    if args.output:
        save_outputs(args.output, outputs)
        return EXIT_OK
    starts = int((stream.instructions["op"] == 0).sum())
    print(f"ran {stream.kernel}: {starts} DMAs, {args.mode} mode; final values:")
    for name, value in outputs.items():
        print(f"  {name}: {value.dtype.name}{list(value.shape)}")
    return EXIT_OK


def _run_expecting(args: argparse.Namespace, inputs: dict) -> int:
    """--verify-diagnostics for run: the error (or none) must be the one the
    program's comments expect, in every completion mode."""
    from copyir.backends.interpreter import fill_inputs, run_stream

    text, name = read_source(args.file)
    problems = []
    for mode in ("random", "eager", "on_wait"):
        error = None
        try:
            stream = _stream(args)
            if args.fill_inputs:
                inputs = fill_inputs(stream, inputs, args.fill_inputs, args.seed)
            run_stream(stream, inputs, mode, args.seed)
        except CopyIRError as err:
            error = err
        problems += [f"{mode} mode: {p}" for p in check(error, expectations(text))]
    for problem in problems:
        print(f"{name}: {problem}", file=sys.stderr)
    return EXIT_INVALID if problems else EXIT_OK


def _stream(args: argparse.Namespace):
    """The program to run as a stream: lowered here, or read as lowered."""
    from copyir.stream import load_npz, read_dma

    path = args.file
    if path.endswith(".npz"):
        if os.path.isdir(path):
            raise FileError(f"{path} is a directory")
        if not os.path.exists(path):
            raise FileError(f"cannot read {path}: No such file or directory")
        return load_npz(path, path)
    if path.endswith(".dma"):
        text, name = read_source(path)
        args.sources = {name: text}
        return read_dma(text, name)
    _check_target(args.target)
    module = _load(path, args, verify=False)
    return copyir.to_stream(copyir.lower(module, args.kernel, args.target))


# -- helpers ------------------------------------------------------------------


def _load(path: str, args: argparse.Namespace, verify: bool = True):
    """Read and parse one program, and verify it unless the caller will;
    errors propagate, located."""
    text, name = read_source(path)
    args.sources = {name: text}
    module, error = _checked(text, name, args, verify)
    if error is not None:
        raise error
    return module


def _check_target(name: str) -> None:
    """A target that cannot be had is a usage error, found before any work."""
    from copyir.target import get_target

    try:
        get_target(name)
    except CopyIRError as err:
        raise UsageError(str(err)) from None


def _checked(text: str, name: str, args: argparse.Namespace, verify: bool = True):
    """Parse and verify one program: (module, None) or (None, its error)."""
    try:
        module = copyir.parse(text, filename=name, format=args.input_format)
        if args.kernel is not None:
            kernel = copyir.select_kernel(module, args.kernel)
            for other in list(module.ops):
                if other is not kernel:
                    other.detach()
                    other.erase()
        if verify:
            copyir.verify(module, args.target)
    except CopyIRError as err:
        return None, err
    return module, None


def _report(err: CopyIRError, sources: dict[str, str]) -> None:
    print(format_error(err, sources), file=sys.stderr)


def _write(output: str | None, text: str) -> None:
    if output:
        write_atomic(output, text)
    elif text:
        sys.stdout.write(text)


def _refuse_overwriting_inputs(output: str | None, inputs: Sequence[str]) -> None:
    """Never write over an input; `--input NAME=FILE` names FILE."""
    if output is None or output == "-" or not os.path.exists(output):
        return
    for spec in inputs:
        path = spec.partition("=")[2] or spec
        if path != "-" and os.path.exists(path) and os.path.samefile(output, path):
            raise UsageError(f"refusing to overwrite the input file {path}")


if __name__ == "__main__":
    sys.exit(main())
