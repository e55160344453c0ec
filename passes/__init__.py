"""copyir's passes, one per file, and the registry that names each once."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def _verify() -> type[ModulePass]:
    from copyir.passes.verify import VerifyPass

    return VerifyPass


def _expand_pytree_copies() -> type[ModulePass]:
    from copyir.passes.expand_pytree_copies import ExpandPytreeCopiesPass

    return ExpandPytreeCopiesPass


def _expand_windows() -> type[ModulePass]:
    from copyir.passes.expand_windows import ExpandWindowsPass

    return ExpandWindowsPass


def _assign_addresses() -> type[ModulePass]:
    from copyir.passes.assign_addresses import AssignAddressesPass

    return AssignAddressesPass


def _convert_copy_to_dma() -> type[ModulePass]:
    from copyir.passes.convert_copy_to_dma import ConvertCopyToDmaPass

    return ConvertCopyToDmaPass


PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "verify": _verify,
    "expand-pytree-copies": _expand_pytree_copies,
    "expand-windows": _expand_windows,
    "assign-addresses": _assign_addresses,
    "convert-copy-to-dma": _convert_copy_to_dma,
}
"""Pass name -> a function returning its class, as xDSL's pipeline parser wants."""

LOWERING = (
    "expand-pytree-copies",
    "expand-windows",
    "assign-addresses",
    "convert-copy-to-dma",
)
"""The default pipeline: what `copyir lower` runs, and `copyir opt` without -p."""


def description(name: str) -> str:
    """A pass's one-line description: the first line of its class docstring."""
    doc = PASSES[name]().__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
