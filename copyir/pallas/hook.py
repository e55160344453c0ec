"""Where copyir takes a `pallas_call` from Pallas' TPU interpret mode.

Pallas chooses its interpreter when a `pallas_call` is lowered (eagerly or
under `jax.jit`): the config `pallas_tpu_interpret_mode_context_manager`,
part of the jit cache key, overrides the kernel's `interpret=`, and an
`InterpretParams` there lowers the call to `interpret_pallas_call(*operands,
interpret_params=..., **params)` (`_pallas_call_lowering` in jax's
`pallas_call.py`, 0.10.2 and 0.12 alike). `install()` puts a dispatcher in
that function's place, once: parameters of a `Routed` subclass lower the
call themselves; any other reaches Pallas' own interpreter unchanged. A
`Routed` value in the config is therefore all a context manager sets, and
executables compiled for it are cached apart from Pallas' own.

Pallas reads the config when `pl.pallas_call(kernel, ...)` builds the
call, not when the call runs, so a call built outside the context keeps
its own `interpret=`. The lowering rule of `pallas_call` is therefore
wrapped too: while a `Routed` value is in the config, it lowers every
call. Such a call declared no interpret-mode effects, so its callback is
unordered (`ordered=False`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from jax._src import config
from jax._src.interpreters import mlir
from jax._src.pallas.mosaic.interpret import interpret_pallas_call as _interpreter
from jax._src.pallas.mosaic.interpret.params import InterpretParams
from jax._src.pallas.pallas_call import _pallas_call_lowering, pallas_call_p

from copyir.pallas.calls import call_name

_PALLAS_INTERPRETER = _interpreter.interpret_pallas_call


@dataclasses.dataclass(frozen=True, kw_only=True)
class Routed(InterpretParams):
    """Interpret-mode parameters whose `pallas_call`s lower through
    `lower` instead of Pallas' interpreter; `ordered` says whether the
    call declared the ordered effects of interpret mode."""

    ordered: bool = True

    def lower(self, operands: Sequence[Any], params: dict[str, Any]) -> Sequence[Any]:
        """The call's results, traced from its operands (JAX values)."""
        raise NotImplementedError


def _dispatch(*operands: Any, interpret_params: Any, **params: Any) -> Sequence[Any]:
    if isinstance(interpret_params, Routed):
        return interpret_params.lower(operands, params)
    return _PALLAS_INTERPRETER(*operands, interpret_params=interpret_params, **params)


def _lowering(ctx: Any, *in_nodes: Any, interpret: Any, **params: Any) -> Any:
    active = config.pallas_tpu_interpret_mode_context_manager.value
    if isinstance(active, Routed) and not isinstance(interpret, Routed):
        interpret = dataclasses.replace(active, ordered=False)
    return _pallas_call_lowering(ctx, *in_nodes, interpret=interpret, **params)


def install() -> None:
    """Put the dispatcher in place of Pallas' interpreter, and the routing
    lowering rule in place of Pallas' (idempotent)."""
    _interpreter.interpret_pallas_call = _dispatch
    mlir.register_lowering(pallas_call_p, _lowering)


@contextlib.contextmanager
def routed(params: Routed) -> Iterator[None]:
    """Every `pallas_call` lowered inside lowers through `params`."""
    install()
    previous = config.pallas_tpu_interpret_mode_context_manager.swap_local(params)
    try:
        yield
    finally:
        config.pallas_tpu_interpret_mode_context_manager.set_local(previous)


@dataclasses.dataclass(frozen=True)
class Captured:
    """One `pallas_call` as it ran: its name, its equation's parameters
    (those Pallas' interpreter receives) and its concrete operands."""

    name: str
    params: dict[str, Any]
    operands: list[Any]


_captures: list[list[Captured]] = []


@dataclasses.dataclass(frozen=True, kw_only=True)
class Capture(Routed):
    """Run each call in Pallas' interpret mode (`pallas` parameters) and
    record it, with its operands, in the innermost `capturing()` list."""

    pallas: InterpretParams | None = None

    def lower(self, operands: Sequence[Any], params: dict[str, Any]) -> Sequence[Any]:
        from jax.experimental import io_callback

        def record(*values: Any) -> None:
            if _captures:
                call = Captured(call_name(params), dict(params), list(values))
                _captures[-1].append(call)

        io_callback(record, None, *operands, ordered=self.ordered)
        pallas = self.pallas or InterpretParams()
        return _PALLAS_INTERPRETER(*operands, interpret_params=pallas, **params)


@contextlib.contextmanager
def capturing(pallas: InterpretParams | None = None) -> Iterator[list[Captured]]:
    """The `pallas_call`s executed inside, in order, each run by Pallas'
    interpret mode with `pallas` (default `InterpretParams()`)."""
    calls: list[Captured] = []
    _captures.append(calls)
    try:
        with routed(Capture(pallas=pallas)):
            yield calls
    finally:
        _captures.pop()
