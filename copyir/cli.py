"""The `copyir` command line: `copyir verify` (and, as they land, opt, lower, run).

Exit status: 0 when every program is valid, 1 when one is invalid (with a
located diagnostic), 2 for a usage error or an unreadable file, 3 for an
internal error, which is always a bug in copyir.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import copyir
from copyir.diagnostics import format_error
from copyir.errors import CopyIRError
from copyir.files import UnreadableInput, read_source, write_atomic

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """A mistake in how copyir was called (exit status 2)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _argument_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (UsageError, UnreadableInput) as err:
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


def _argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="copyir",
        description="Write, check and run TPU-style DMA copy programs.",
    )
    parser.add_argument(
        "--version", action="version", version=f"copyir {copyir.__version__}"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    verify = commands.add_parser(
        "verify",
        help="check programs and report the first error of each",
        description="Check copy programs; print `file:line:col: error: ...` for "
        "the first error of each invalid one.",
    )
    verify.add_argument("files", nargs="+", metavar="FILE", help="`-` reads stdin")
    _add_input_options(verify)
    verify.add_argument(
        "--emit",
        choices=("cpy", "mlir"),
        help="print each valid program in the authoring syntax or as MLIR",
    )
    verify.add_argument(
        "--debuginfo",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print loc(...) on every op (default: on for mlir, off for cpy)",
    )
    verify.add_argument("-o", "--output", help="write the --emit output here")
    verify.set_defaults(run=_verify)
    return parser


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", metavar="NAME", help="use this kernel of the file")
    parser.add_argument(
        "--format",
        choices=("cpy", "mlir"),
        help="input syntax (default: from the file name; stdin is cpy)",
    )


def _verify(args: argparse.Namespace) -> int:
    if args.output and args.emit is None:
        raise UsageError("-o needs --emit")
    if args.output and len(args.files) > 1:
        raise UsageError("-o takes one input file")
    _refuse_overwriting_inputs(args.output, args.files)
    status = EXIT_OK
    emitted = []
    for path in args.files:
        text = None
        try:
            text, name = read_source(path)
            module, _, _ = _load_text(text, name, args)
        except CopyIRError as err:
            _report(err, path, text)
            status = EXIT_INVALID
            continue
        if args.emit:
            emitted.append(copyir.to_text(module, args.emit, args.debuginfo))
    output = "".join(emitted)
    if args.output:
        write_atomic(args.output, output)
    elif output:
        sys.stdout.write(output)
    return status


def _load_text(text: str, name: str, args: argparse.Namespace):
    module = copyir.parse(text, filename=name, format=args.format)
    if args.kernel is not None:
        kernel = copyir.select_kernel(module, args.kernel)
        for other in list(module.ops):
            if other is not kernel:
                other.detach()
                other.erase()
    copyir.verify(module)
    return module, text, name


def _report(err: CopyIRError, path: str, text: str | None) -> None:
    name = "<stdin>" if path == "-" else path
    sources = {name: text} if text is not None else {}
    if err.loc is None:
        print(f"{name}: error: {err.message}", file=sys.stderr)
        for note in err.notes:
            print(f"note: {note.message}", file=sys.stderr)
        return
    print(format_error(err, sources), file=sys.stderr)


def _refuse_overwriting_inputs(output: str | None, inputs: Sequence[str]) -> None:
    if output is None or output == "-":
        return
    for path in inputs:
        if path != "-" and os.path.exists(output) and os.path.samefile(output, path):
            raise UsageError(f"refusing to overwrite the input file {path}")


if __name__ == "__main__":
    sys.exit(main())
