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
from copyir.expectations import check, expectations, split_chunks
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
        try:
            text, name = read_source(path)
        except CopyIRError as err:
            _report(err, {})
            status = EXIT_INVALID
            continue
        for chunk in split_chunks(text, args.split_input_file):
            module, error = _load(chunk.text, name, args)
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
    output = separator.join(emitted)
    if args.output:
        write_atomic(args.output, output)
    elif output:
        sys.stdout.write(output)
    return status


def _load(text: str, name: str, args: argparse.Namespace):
    """Parse and verify one program: (module, None) or (None, its error)."""
    try:
        module = copyir.parse(text, filename=name, format=args.format)
        if args.kernel is not None:
            kernel = copyir.select_kernel(module, args.kernel)
            for other in list(module.ops):
                if other is not kernel:
                    other.detach()
                    other.erase()
        copyir.verify(module)
    except CopyIRError as err:
        return None, err
    return module, None


def _report(err: CopyIRError, sources: dict[str, str]) -> None:
    print(format_error(err, sources), file=sys.stderr)


def _refuse_overwriting_inputs(output: str | None, inputs: Sequence[str]) -> None:
    if output is None or output == "-":
        return
    for path in inputs:
        if path != "-" and os.path.exists(output) and os.path.samefile(output, path):
            raise UsageError(f"refusing to overwrite the input file {path}")


if __name__ == "__main__":
    sys.exit(main())
