"""copyir's passes, one per file, and the registry that names each once.

Also the pipeline parser of `-p` (xDSL's spec syntax, `pass-a,pass-b{opt=1}`)
with what xDSL's leaves out: a did-you-mean for an unknown pass or option,
file names as option values without quotes (`{target=my.toml}`), and a
default target for every pass that takes one.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import itertools
import re
import textwrap
import typing
from collections.abc import Callable

from xdsl.passes import ModulePass

from copyir import errors
from copyir.errors import InvocationError


def _verify() -> type[ModulePass]:
    from copyir.passes.verify import VerifyPass

    return VerifyPass


def _expand_min_max() -> type[ModulePass]:
    from copyir.passes.expand_min_max import ExpandMinMaxPass

    return ExpandMinMaxPass


def _expand_pipelines() -> type[ModulePass]:
    from copyir.passes.expand_pipelines import ExpandPipelinesPass

    return ExpandPipelinesPass


def _expand_pytree_copies() -> type[ModulePass]:
    from copyir.passes.expand_pytree_copies import ExpandPytreeCopiesPass

    return ExpandPytreeCopiesPass


def _expand_windows() -> type[ModulePass]:
    from copyir.passes.expand_windows import ExpandWindowsPass

    return ExpandWindowsPass


def _assign_addresses() -> type[ModulePass]:
    from copyir.passes.assign_addresses import AssignAddressesPass

    return AssignAddressesPass


def _cse() -> type[ModulePass]:
    from copyir.passes.cse import CsePass

    return CsePass


def _convert_copy_to_dma() -> type[ModulePass]:
    from copyir.passes.convert_copy_to_dma import ConvertCopyToDmaPass

    return ConvertCopyToDmaPass


PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "verify": _verify,
    "expand-pipelines": _expand_pipelines,
    "expand-pytree-copies": _expand_pytree_copies,
    "expand-min-max": _expand_min_max,
    "expand-windows": _expand_windows,
    "assign-addresses": _assign_addresses,
    "cse": _cse,
    "convert-copy-to-dma": _convert_copy_to_dma,
}
"""Pass name -> a function returning its class, as xDSL's pipeline parser wants."""

LOWERING = (
    "expand-pipelines",
    "expand-pytree-copies",
    "expand-min-max",
    "expand-windows",
    "assign-addresses",
    "convert-copy-to-dma",
)
"""The default pipeline: what `copyir lower` runs, and `copyir opt` without -p.

Without `cse`: `convert-copy-to-dma` folds each view once however many ops
hold an equal one, and the stream is the same either way, so merging them
first costs more than it saves (on an unrolled ring of 10,000 DMAs, 80,000
ops, xDSL's CSE cost three times the time it saved `convert-copy-to-dma`).
`copyir opt -p cse` still runs it."""


def description(name: str) -> str:
    """A pass's one-line description: the first line of its class docstring."""
    doc = PASSES[name]().__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


class PipelineError(InvocationError):
    """A pass pipeline that cannot be built: the command line is wrong."""


@dataclasses.dataclass(frozen=True)
class Option:
    """A pass option: a field of the pass's dataclass."""

    name: str
    type: str
    default: object
    doc: str


def option_names(name: str) -> list[str]:
    """The names of a pass's options: what a pipeline spec may set (read
    without the docs, which `options` reads from the pass's source)."""
    return [f.name for f in dataclasses.fields(PASSES[name]()) if f.init]


@functools.cache
def options(name: str) -> tuple[Option, ...]:
    """The options of a pass, with their types, defaults and docstrings
    (read from the source once per process, for `--list-passes`)."""
    cls = PASSES[name]()
    hints = typing.get_type_hints(cls)
    docs = _field_docs(cls)
    return tuple(
        Option(f.name, _type_name(hints[f.name]), f.default, docs.get(f.name, ""))
        for f in dataclasses.fields(cls)
        if f.init
    )


def _type_name(hint: object) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint)


def _field_docs(cls: type) -> dict[str, str]:
    """The string after each field of a class: its docstring by convention
    (Python keeps no such docstrings at run time, so read the source)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    node = tree.body[0] if tree.body else None
    body = node.body if isinstance(node, ast.ClassDef) else []
    docs = {}
    for field, after in itertools.pairwise(body):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field.target.id] = " ".join(after.value.value.split())
    return docs


def parse_pipeline(spec: str, target: str | None = None) -> list[ModulePass]:
    """The passes of a `-p` spec; `target` is given to every pass with a
    `target` option that the spec leaves unset."""
    from xdsl.utils.arg_spec import ArgSpec
    from xdsl.utils.arg_spec import parse_pipeline as parse_specs
    from xdsl.utils.exceptions import ArgSpecParseError

    try:
        specs = list(parse_specs(_quote_values(spec)))
    except (ArgSpecParseError, ValueError) as err:
        why = str(err).removeprefix("Error parsing pass pipeline specification:\n")
        why = why.strip()
        raise PipelineError(errors.PIPELINE_SYNTAX.format(spec=spec, why=why)) from None
    passes = []
    for arg in specs:
        if arg.name not in PASSES:
            raise PipelineError(
                errors.UNKNOWN_PASS.format(
                    name=arg.name, hint=_hint(arg.name, PASSES), known=", ".join(PASSES)
                )
            )
        known = option_names(arg.name)
        given = dict(arg.normalize_parameter_names().parameters)
        for option in given:
            if option not in known:
                raise PipelineError(
                    errors.UNKNOWN_PASS_OPTION.format(
                        option=option,
                        name=arg.name,
                        hint=_hint(option, known),
                        known=", ".join(known) or "none",
                    )
                )
        if target is not None and "target" in known and "target" not in given:
            given["target"] = (target,)
        try:
            passes.append(PASSES[arg.name]().from_pass_spec(ArgSpec(arg.name, given)))
        except ValueError as err:
            raise PipelineError(
                errors.PASS_OPTION_VALUE.format(name=arg.name, why=err)
            ) from None
    return passes


def _hint(word: str, candidates) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return errors.DID_YOU_MEAN_SUFFIX.format(match=close[0]) if close else ""


_OPTIONS = re.compile(r"\{([^{}\"]*)\}")
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_-]+|[-+]?[0-9]+(\.[0-9]*([eE][-+]?[0-9]+)?)?")


def _quote_values(spec: str) -> str:
    """Quote option values that xDSL's lexer would split, such as the file
    name in `assign-addresses{target=my.toml}`; options with quotes of their
    own are left as they are."""

    def quote(value: str) -> str:
        if _PLAIN_VALUE.fullmatch(value):
            return value
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def fix(match: re.Match[str]) -> str:
        items = []
        for item in match[1].split():
            key, equals, value = item.partition("=")
            if equals:
                value = ",".join(quote(v) for v in value.split(","))
            items.append(key + equals + value)
        return "{" + " ".join(items) + "}"

    return _OPTIONS.sub(fix, spec)
