"""A Pallas kernel's jaxpr, equation by equation, as copy-dialect ops.

`BodyImporter.run` walks a jaxpr with each variable bound to what it is
for copyir (`values`): refs become views and semaphore indices where they
are used (`refs`), integers index expressions (`integers`), `scan` and
`while` loops `copy.for`, `cond` on an index condition `copy.when`,
`run_scoped` a `copy.scope` (`control`), `dma_start` / `dma_wait`
`copy.dma`, and stores of computed arrays `copy.compute` (`arrays`). Every
op carries the Python line of the statement that made its equation. What
has no copyir form yet is one `CopyIRError` naming the construct and its
line. This module dispatches each equation to its handler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from copyir.pallas.arrays import VECTOR_OPS
from copyir.pallas.control import Control
from copyir.pallas.integers import named_division
from copyir.pallas.symbols import COMPARISONS
from copyir.pallas.walker import Value, is_array, known, unsupported

_INLINED = ("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "remat")
"""Call primitives whose jaxpr the importer walks in place."""


class BodyImporter(Control):
    """Walks jaxprs into the block being built (see the module docstring)."""

    def equation(self, eqn, args: list[Value]) -> Any:
        name = eqn.primitive.name
        handler = _HANDLERS.get(name)
        if handler is not None:
            return handler(self, eqn, args)
        if name in _INLINED:
            closed = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
            if name in ("jit", "pjit") and eqn.params.get("name") in _NAMED_JITS:
                return _NAMED_JITS[eqn.params["name"]](self, eqn, args)
            return self.run_closed(closed, args)
        if all(known(a) for a in args) and not is_array(eqn):
            return self.evaluate(eqn, args)  # `div 0.5 0.5` is a number
        if name in VECTOR_OPS or is_array(eqn):
            return self.vector(eqn, args)
        raise self.unsupported(f"`{name}`")


_NAMED_JITS: dict[str, Callable] = {
    "remainder": named_division("%"),
    "floor_divide": named_division("//"),
}
"""`jnp.remainder` and `jnp.floor_divide` (Python's `%` and `//` on
traced integers) are jits of these names: recognised whole."""

_HANDLERS: dict[str, Callable[[BodyImporter, Any, list], Any]] = {
    "add": BodyImporter.integer,
    "sub": BodyImporter.integer,
    "mul": BodyImporter.integer,
    "neg": BodyImporter.integer,
    "min": BodyImporter.extremum,
    "max": BodyImporter.extremum,
    "clamp": BodyImporter.clamp,
    "convert_element_type": BodyImporter.convert,
    "select_n": BodyImporter.select,
    "multiple_of": BodyImporter.hint,
    "program_id": BodyImporter.program_id,
    "num_programs": BodyImporter.num_programs,
    "dma_start": BodyImporter.dma,
    "dma_wait": BodyImporter.dma,
    "get": BodyImporter.get,
    "swap": BodyImporter.swap,
    "addupdate": BodyImporter.swap,
    "run_scoped": BodyImporter.run_scoped,
    "scan": BodyImporter.scan,
    "while": BodyImporter.while_loop,
    "cond": BodyImporter.cond,
    "emit_pipeline": BodyImporter.emit_pipeline,
    "semaphore_signal": BodyImporter.semaphore_op,
    "semaphore_wait": BodyImporter.semaphore_op,
    "semaphore_read": BodyImporter.semaphore_op,
}
_HANDLERS |= {name: BodyImporter.comparison for name in COMPARISONS}
_HANDLERS |= {name: BodyImporter.logic for name in ("and", "or", "not")}

__all__ = ["BodyImporter", "unsupported"]
