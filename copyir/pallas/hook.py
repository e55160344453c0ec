"""Where copyir takes a `pallas_call` from Pallas, and forces a mode on it.

Pallas chooses its interpreter when a `pallas_call` is lowered (eagerly or
under `jax.jit`): an `InterpretParams` as the call's `interpret` lowers it
to `interpret_pallas_call(*operands, interpret_params=..., **params)`
(`_pallas_call_lowering` in jax's `pallas_call.py`, 0.10.2 and 0.12
alike). `install()` puts a dispatcher in that function's place, once:
parameters of a `Routed` subclass lower the call themselves; any other
reaches Pallas' own interpreter unchanged.

`forced(params)` gives every `pallas_call` bound inside `params` as its
`interpret`. Pallas' own `force_tpu_interpret_mode` sets the config
`pallas_tpu_interpret_mode_context_manager` (part of the jit cache key),
but Pallas reads it when `pl.pallas_call(kernel, ...)` builds the call,
not when the call runs, so a call built outside the context would keep its
own `interpret=`. `forced` sets the config too (so that jit caches what is
traced inside apart), and `pallas_call_p.bind`, wrapped once, puts the
forced params in every equation bound meanwhile, so that the call also
declares interpret mode's effects.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jax._src import config
from jax._src.pallas.mosaic.interpret import interpret_pallas_call as _interpreter
from jax._src.pallas.mosaic.interpret.params import InterpretParams
from jax._src.pallas.pallas_call import pallas_call_p

from copyir.pallas.calls import call_name

_PALLAS_INTERPRETER = _interpreter.interpret_pallas_call


@dataclasses.dataclass(frozen=True, kw_only=True)
class Routed(InterpretParams):
    """Interpret-mode parameters whose `pallas_call`s lower through
    `lower` instead of Pallas' interpreter."""

    def lower(self, operands: Sequence[Any], params: dict[str, Any]) -> Sequence[Any]:
        """The call's results, traced from its operands (JAX values)."""
        raise NotImplementedError


def _dispatch(*operands: Any, interpret_params: Any, **params: Any) -> Sequence[Any]:
    if isinstance(interpret_params, Routed):
        return interpret_params.lower(operands, params)
    return _PALLAS_INTERPRETER(*operands, interpret_params=interpret_params, **params)


class _Forcing(threading.local):
    """The params forced in this thread, innermost last: per thread, as
    JAX's config is, so that a call bound in another thread meanwhile is
    neither forced nor cached as if it were."""

    stack: list[InterpretParams]

    def __init__(self) -> None:
        self.stack = []


_forcing = _Forcing()


def _forced_bind(real: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(real)
    def bind(*args: Any, **params: Any) -> Any:
        if _forcing.stack:
            params["interpret"] = _forcing.stack[-1]
        return real(*args, **params)

    return bind


_installed: list[bool] = []


def install() -> None:
    """Put the dispatcher in place of Pallas' interpreter and wrap
    `pallas_call_p.bind`, once."""
    if not _installed:
        _interpreter.interpret_pallas_call = _dispatch
        pallas_call_p.bind = _forced_bind(pallas_call_p.bind)
        _installed.append(True)


@contextlib.contextmanager
def forced(params: InterpretParams) -> Iterator[None]:
    """Every `pallas_call` bound inside runs with `interpret=params`."""
    install()
    previous = config.pallas_tpu_interpret_mode_context_manager.swap_local(params)
    _forcing.stack.append(params)
    try:
        yield
    finally:
        _forcing.stack.pop()
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

        io_callback(record, None, *operands, ordered=True)
        pallas = self.pallas or InterpretParams()
        return _PALLAS_INTERPRETER(*operands, interpret_params=pallas, **params)


@contextlib.contextmanager
def capturing(pallas: InterpretParams | None = None) -> Iterator[list[Captured]]:
    """The `pallas_call`s executed inside, in order, each run by Pallas'
    interpret mode with `pallas` (default `InterpretParams()`)."""
    calls: list[Captured] = []
    _captures.append(calls)
    try:
        with forced(Capture(pallas=pallas)):
            yield calls
    finally:
        _captures.pop()
