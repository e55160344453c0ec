"""copyir's passes, one per file, and the registry that names each once."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def _verify() -> type[ModulePass]:
    from copyir.passes.verify import VerifyPass

    return VerifyPass


PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "verify": _verify,
}
"""Pass name -> a function returning its class, as xDSL's pipeline parser wants."""
