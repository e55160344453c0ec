"""`copyir import` and `copyir check`: the Pallas frontend from the shell.

Both run the zero-argument function `--call NAME` of a Python file, as the
file's own `if __name__ == "__main__"` would: `import` writes each
`pallas_call` met as a `.cpy` kernel (its locations the file's lines) with
one inputs file per kernel; `check` runs every kernel on copyir and reports
as `copyir run` does.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from copyir import errors
from copyir.errors import CopyIRError, InvocationError
from copyir.machine import MODES


def add_parsers(commands, seed_type: Callable[[str], int]) -> None:
    """The two commands' arguments, beside the others of `copyir`."""
    imp = commands.add_parser(
        "import",
        help="write the Pallas kernels a Python function calls as .cpy kernels",
        description="Run the zero-argument function NAME of FILE.py with every "
        "pallas_call imported into copyir; write each kernel to one .cpy file "
        "(locations pointing at FILE.py) and its inputs to "
        "OUT.KERNEL.inputs.npz beside it.",
    )
    _common(imp)
    imp.add_argument(
        "-o", "--output", help="the .cpy file to write (default or `-`: stdout)"
    )
    imp.set_defaults(run=import_command)
    check = commands.add_parser(
        "check",
        help="run a Python function with its Pallas kernels on copyir",
        description="Run the zero-argument function NAME of FILE.py with every "
        "pallas_call executed by copyir (every copyir check applies), and "
        "report as `copyir run` does.",
    )
    _common(check)
    check.add_argument(
        "--mode",
        choices=MODES,
        default="random",
        help="when DMAs complete inside their in-flight window (default: random)",
    )
    check.add_argument(
        "--seed", type=seed_type, default=0, help="for random mode: 0 to 2**63-1"
    )
    check.add_argument(
        "--compare",
        action="store_true",
        help="run it also in Pallas' TPU interpret mode, in eager and on_wait "
        "modes (or --mode), and report where the two differ; exit 1 if a "
        "difference is not a known divergence",
    )
    check.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="with --compare: a wait in interpret mode blocked this long is a "
        "hang (default: 10)",
    )
    check.set_defaults(run=check_command)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE.py", help="the Python file")
    parser.add_argument(
        "--call", required=True, metavar="NAME", help="its zero-argument function"
    )
    parser.add_argument(
        "--opaque-compute",
        action="store_true",
        help="import vector operations copyir has no op for as opaque "
        "computations (reads and writes checked, results poison)",
    )


def load_function(path: str, name: str) -> Callable[[], Any]:
    """The function `name` of the Python file, its directory importable
    (as `python FILE.py` has it)."""
    from copyir.pallas import require_jax

    require_jax()
    file = Path(path)
    if not file.is_file():
        raise InvocationError(errors.PALLAS_NO_FILE.format(path=path))
    directory = str(file.resolve().parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(f"_copyir_user_{file.stem}", file)
    assert spec is not None and spec.loader is not None  # a .py file
    module = importlib.util.module_from_spec(spec)
    _user_code(path, "<module>", lambda: spec.loader.exec_module(module))  # type: ignore[union-attr]
    function = getattr(module, name, None)
    if not callable(function):
        raise InvocationError(errors.PALLAS_NO_FUNCTION.format(path=path, name=name))
    return function


def _user_code(path: str, name: str, work: Callable[[], Any]) -> Any:
    """Run the user's code: copyir's errors pass through; any other
    exception is the user's program failing, one line naming it."""
    try:
        return work()
    except CopyIRError:
        raise
    except Exception as err:  # the user's code, or JAX tracing it
        message = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise CopyIRError(
            errors.PALLAS_USER_ERROR.format(
                path=path, name=name, kind=type(err).__name__, message=message
            )
        ) from None


def import_command(args: argparse.Namespace) -> int:
    from copyir.api import to_text
    from copyir.files import check_output, save_outputs, write_output
    from copyir.pallas.api import import_traced

    check_output(args.output)
    traced = _traced(args)
    kernels = import_traced(traced, opaque_compute=args.opaque_compute)
    if not kernels:
        raise CopyIRError(errors.PALLAS_NO_KERNEL.format(name=args.call))
    texts = [to_text(k.module, "cpy", debuginfo=True) for k in kernels]
    write_output(args.output, "\n".join(texts))
    stem = _inputs_stem(args)
    for kernel in kernels:
        path = f"{stem}.{kernel.name}.inputs.npz"
        check_output(path)
        save_outputs(path, kernel.inputs)
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _inputs_stem(args: argparse.Namespace) -> str:
    """Where the inputs files go: beside the output, named after it (or
    after the Python file, in the working directory, for stdout)."""
    if args.output and args.output != "-":
        return os.path.splitext(args.output)[0]
    return Path(args.file).stem


def check_command(args: argparse.Namespace) -> int:
    from copyir.cli import executed_dmas
    from copyir.pallas.api import execute
    from copyir.pallas.checking import checking

    def report(kernel, stream, outputs) -> None:
        print(
            f"ran {kernel.name}: {executed_dmas(stream)} DMAs, {args.mode} mode; "
            "final values:"
        )
        for name, value in outputs.items():
            print(f"  {name}: {value.dtype.name}{list(value.shape)}")

    if args.compare:
        return compare_command(args)
    with checking(
        args.mode, args.seed, opaque_compute=args.opaque_compute, observe=report
    ):
        execute(_traced(args))
    return 0


def compare_command(args: argparse.Namespace) -> int:
    """`copyir check --compare`: one line per mode, one per difference;
    exit 1 where copyir stopped at an unsupported construct or a
    difference is unclassified."""
    from copyir.pallas.compare import SHARED_MODES, compare

    _traced(args)  # the user's exceptions are told apart here
    function = load_function(args.file, args.call)
    modes = [args.mode] if args.mode in SHARED_MODES else list(SHARED_MODES)
    comparison = compare(
        function, modes=modes, timeout=args.timeout, opaque_compute=args.opaque_compute
    )
    for line in comparison.report():
        print(line)
    print(comparison.status)
    return 1 if comparison.status in ("not supported", "differs (unclassified)") else 0


def _traced(args: argparse.Namespace):
    """The function of the file, traced: the user's code runs here, and
    only an exception from it is theirs (one in copyir after this is a bug
    of copyir's, exit 3)."""
    from copyir.pallas.api import trace

    function = load_function(args.file, args.call)
    _remember_source(args)
    return _user_code(args.file, args.call, lambda: trace(function, ()))


def _remember_source(args: argparse.Namespace) -> None:
    """The file's lines, for diagnostics that point at them."""
    from copyir.pallas.jaxpr_source import shown

    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    args.sources[shown(str(Path(args.file).resolve()))] = text
