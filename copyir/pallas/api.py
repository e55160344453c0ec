"""Run JAX functions with their Pallas kernels on copyir.

`run(f, *args)` traces `f` to a jaxpr and executes it inside `checking()`:
every `pallas_call` is imported (`calls.import_call`) and run by copyir's
interpreter on the operand values it receives, every other equation by
JAX on the CPU. `import_kernels(f, *args)` evaluates the jaxpr equation by
equation and returns the kernels met, with their inputs, without running
more of them than later equations need.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from copyir import errors
from copyir.errors import CopyIRError
from copyir.mlir import gc_paused
from copyir.names import FreshNames
from copyir.pallas.calls import ImportedKernel, import_call
from copyir.pallas.checking import Observer

OnCall = Callable[[Any, list], list]
"""What evaluating a `pallas_call` equation does: its results."""


@dataclass(frozen=True)
class Traced:
    """A traced call `f(*args)`: its closed jaxpr, its flat arguments and
    its output tree. Tracing runs the user's Python (an exception there is
    theirs); what follows is copyir's."""

    closed: Any
    flat: list
    tree: Any


def trace(f: Callable, args: Sequence[Any]) -> Traced:
    import jax

    closed, shape = jax.make_jaxpr(f, return_shape=True)(*args)
    return Traced(
        closed, jax.tree_util.tree_leaves(args), jax.tree_util.tree_structure(shape)
    )


def run(
    f: Callable,
    *args: Any,
    mode: str = "random",
    seed: int = 0,
    opaque_compute: bool = False,
    observe: Observer | None = None,
) -> Any:
    """`f(*args)` inside `checking()`: every `pallas_call` in it run by
    copyir (in `mode`, seeded by `seed`; the kernel's own `interpret=` is
    ignored), every other operation by JAX. A copyir check that fails
    raises its `CopyIRError`, located at the kernel's Python line.
    `observe(kernel, stream, outputs)` sees each kernel's run."""
    import jax

    from copyir.pallas.checking import checking

    with checking(mode, seed, opaque_compute=opaque_compute, observe=observe):
        return jax.block_until_ready(f(*args))


def execute(traced: Traced) -> Any:
    """A call traced inside `checking()`, compiled and run (the user's
    Python does not run again): `copyir check` traces first, so that an
    exception there is told apart as the user's."""
    import jax
    import jax.extend

    evaluated = jax.jit(jax.extend.core.jaxpr_as_fun(traced.closed))
    outs = jax.block_until_ready(evaluated(*traced.flat))
    return jax.tree_util.tree_unflatten(traced.tree, outs)


def run_imported(
    imported: ImportedKernel,
    mode: str = "random",
    seed: int = 0,
    observe: Observer | None = None,
) -> dict[str, np.ndarray]:
    """Verify, lower and run one imported kernel on its inputs."""
    from copyir.api import lowered_stream
    from copyir.backends.interpreter import run_stream

    with gc_paused():
        stream = lowered_stream(imported.module, in_place=True)
    results = run_stream(stream, imported.inputs, mode, seed)
    if observe is not None:
        observe(imported, stream, results)
    return results


def import_kernels(
    f: Callable, *args: Any, opaque_compute: bool = False
) -> list[ImportedKernel]:
    """Each `pallas_call` that `f(*args)` makes, as a copy-dialect module
    with the inputs it received. A kernel whose results a later operation
    needs is run by copyir (eagerly) to give them."""
    return import_traced(trace(f, args), opaque_compute=opaque_compute)


def import_traced(
    traced: Traced, *, opaque_compute: bool = False
) -> list[ImportedKernel]:
    """`import_kernels` of a call traced already."""
    found: list[ImportedKernel] = []
    names = FreshNames()

    def on_call(eqn, values: list) -> list:
        imported = import_call(eqn, values, names, opaque_compute=opaque_compute)
        found.append(imported)
        return [_Later(imported, name) for name in imported.outputs]

    closed = traced.closed
    evaluate(closed.jaxpr, closed.consts, traced.flat, on_call, results=False)
    return found


class _Later:
    """A kernel's result, computed (by a copy of the kernel, run eagerly)
    only if a later operation reads it."""

    def __init__(self, imported: ImportedKernel, name: str):
        self.imported, self.name = imported, name

    def value(self) -> Any:
        import jax.numpy as jnp

        module = self.imported.module.clone()  # the import keeps its own
        copy = dataclasses.replace(self.imported, module=module)
        return jnp.asarray(run_imported(copy, "eager")[self.name])


def evaluate(
    jaxpr,
    consts: Sequence[Any],
    args: Sequence[Any],
    on_call: OnCall,
    *,
    results: bool = True,
) -> list:
    """`jax.core.eval_jaxpr`, with `pallas_call` equations given to
    `on_call` and calls (`jit`) holding one walked into; the outputs'
    values, unless not `results`."""
    env: dict[Any, Any] = {}

    def read(var: Any) -> Any:
        if type(var).__name__ == "Literal":
            return var.val
        value = env[var]
        if isinstance(value, _Later):
            value = env[var] = value.value()
        return value

    for var, value in zip(jaxpr.constvars, consts, strict=True):
        env[var] = value
    for var, value in zip(jaxpr.invars, args, strict=True):
        env[var] = value
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "pallas_call":
            outs = on_call(eqn, [read(v) for v in eqn.invars])
        elif _holds_pallas(eqn) and name in ("jit", "pjit", "closed_call"):
            inner = eqn.params.get("jaxpr") or eqn.params["call_jaxpr"]
            outs = evaluate(
                inner.jaxpr, inner.consts, [read(v) for v in eqn.invars], on_call
            )
        elif _holds_pallas(eqn):
            raise CopyIRError(errors.PALLAS_CALL_INSIDE.format(primitive=name))
        else:
            params = eqn.primitive.get_bind_params(eqn.params)
            with eqn.ctx.manager:
                outs = eqn.primitive.bind(*[read(v) for v in eqn.invars], **params)
            if not eqn.primitive.multiple_results:
                outs = [outs]
        for var, value in zip(eqn.outvars, outs, strict=True):
            if type(var).__name__ != "DropVar":
                env[var] = value
    return [read(v) for v in jaxpr.outvars] if results else []


def _holds_pallas(eqn) -> bool:
    """Whether a `pallas_call` lies anywhere inside the equation's jaxprs."""
    from jax._src import core

    for sub in core.jaxprs_in_params(eqn.params):
        for inner in sub.eqns:
            if inner.primitive.name == "pallas_call" or _holds_pallas(inner):
                return True
    return False
