"""Completion models: when, inside its in-flight window, each DMA moves its
data.

The protocol (`protocol.DmaProtocol`) fixes each DMA's window, from its
start to the wait that finishes it; a correct program gives one result
wherever in its window each DMA moves. A model picks those moments:

- `Eager`: at its start;
- `OnWait`: inside the wait that needs its bytes, the most recently
  started pending DMA first (as Pallas' interpret mode pops its list);
- `Random(seed)`: at a seeded random moment of its window, and the
  iterations of each parallel loop in a seeded permuted order.

A new model (timed, multi-device) is one subclass of `CompletionModel`,
named in `MODELS`; `completion_model` picks one by its `--mode` name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from copyir import errors
from copyir.errors import CopyIRError
from copyir.stream import START, WAIT, Stream

from ..protocol import DmaProtocol, Events

MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class Schedule:
    """The DMAs' data moves in the order they happen."""

    moments: np.ndarray
    """The event after which each move happens."""
    moved: np.ndarray
    """The start event of the DMA that moves."""

    @property
    def completions(self) -> list[tuple[int, int]]:
        """(moment, start event) per move, as Python integers."""
        return list(zip(self.moments.tolist(), self.moved.tolist(), strict=True))


class CompletionModel(ABC):
    """When each DMA of a correct program moves its data (its schedule),
    and in which order the iterations of parallel loops run."""

    @classmethod
    def seeded(cls, seed: int) -> CompletionModel:
        """The model for a run's seed (which most models ignore)."""
        return cls()

    def iteration_order(self, stream: Stream) -> dict[int, np.ndarray]:
        """Each parallel loop's iterations in the order they run, by loop
        number (`validate_stream`'s `order`); empty: program order."""
        return {}

    @abstractmethod
    def schedule(self, protocol: DmaProtocol) -> Schedule:
        """Each DMA's move, at a moment of its window (`protocol.starts`
        to `protocol.finish`)."""


class Eager(CompletionModel):
    """Each DMA moves its data at its start."""

    def schedule(self, protocol: DmaProtocol) -> Schedule:
        return Schedule(protocol.starts.copy(), protocol.starts.copy())


class OnWait(CompletionModel):
    """Pending DMAs complete inside the wait that needs their bytes, the
    most recently started first (jax's interpret mode pops its list)."""

    def schedule(self, protocol: DmaProtocol) -> Schedule:
        moves = _on_wait(protocol.events)
        return Schedule(
            np.array([m for m, _ in moves], np.int64),
            np.array([s for _, s in moves], np.int64),
        )


@dataclass(frozen=True)
class Random(CompletionModel):
    """Each DMA moves at a seeded random moment of its window, ties in a
    random order; parallel loops run their iterations in a seeded
    permuted order (the stream says they do not depend on each other)."""

    seed: int = 0

    @classmethod
    def seeded(cls, seed: int) -> CompletionModel:
        return cls(int(seed))

    def iteration_order(self, stream: Stream) -> dict[int, np.ndarray]:
        rng = np.random.default_rng([self.seed, 1])
        return {
            number: rng.permutation(loop.trip_count)
            for number, loop in enumerate(stream.loops, start=1)
            if loop.parallel
        }

    def schedule(self, protocol: DmaProtocol) -> Schedule:
        starts, finish = protocol.starts, protocol.finish
        rng = np.random.default_rng(self.seed)
        moment = starts + (rng.random(len(starts)) * (finish - starts)).astype(np.int64)
        ties = rng.permutation(len(starts))
        if (int(moment.max(initial=0)) + 1) * len(starts) < 2**62:
            # By moment, ties in a random order: one key, one sort.
            order = np.argsort(moment * len(starts) + ties)
        else:
            order = np.lexsort((ties, moment))
        return Schedule(moment[order], starts[order])


@dataclass(frozen=True)
class Replayed(CompletionModel):
    """Another model's schedule, with the parallel loops run in given
    orders: the k-th parallel loop of the stream (by loop number) visits
    its iterations in the order `orders[k]` lists them, where its trip
    count matches. This replays the grid order
    another interpreter chose (Pallas' interpret mode permutes parallel
    grid dimensions, as its `grid_point_recorder` shows)."""

    base: CompletionModel
    orders: tuple[tuple[int, ...], ...]

    def iteration_order(self, stream: Stream) -> dict[int, np.ndarray]:
        parallel = [
            (number, loop.trip_count)
            for number, loop in enumerate(stream.loops, start=1)
            if loop.parallel
        ]
        return {  # the position at which each iteration runs
            number: np.argsort(np.array(order, np.int64))
            for (number, trips), order in zip(parallel, self.orders, strict=False)
            if len(order) == trips
        }

    def schedule(self, protocol: DmaProtocol) -> Schedule:
        return self.base.schedule(protocol)


MODELS: dict[str, type[CompletionModel]] = {
    "random": Random,
    "eager": Eager,
    "on_wait": OnWait,
}
"""The models by their `--mode` names (`copyir.machine.MODES`)."""


def completion_model(mode: str, seed: int = 0) -> CompletionModel:
    """The model a run's mode names, with its seed (checked for every mode)."""
    if mode not in MODELS:
        raise CopyIRError(errors.RUN_UNKNOWN_MODE.format(mode=mode))
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise CopyIRError(errors.RUN_BAD_SEED.format(seed=seed))
    if not 0 <= seed <= MAX_SEED:
        raise CopyIRError(errors.RUN_BAD_SEED.format(seed=seed))
    return MODELS[mode].seeded(seed)


def _on_wait(events: Events) -> list[tuple[int, int]]:
    """Each move as (wait event, start event): a wait completes pending
    DMAs on its semaphore, the most recently started first, until the
    bytes it needs have arrived."""
    pending: dict[int, list[int]] = {}
    arrived: dict[int, int] = {}
    consumed: dict[int, int] = {}
    moves = []
    kinds, sems, amounts = (
        x.tolist() for x in (events.kind, events.sem, events.amount)
    )
    for event, (kind, sem, amount) in enumerate(zip(kinds, sems, amounts, strict=True)):
        if kind == START:
            pending.setdefault(sem, []).append(event)
            continue
        if kind != WAIT:  # a computation, an invalidation, a scope's end
            continue
        stack = pending.get(sem, [])
        have = arrived.get(sem, 0) - consumed.get(sem, 0)
        while have < amount and stack:
            start = stack.pop()
            moves.append((event, start))
            have += amounts[start]
            arrived[sem] = arrived.get(sem, 0) + amounts[start]
        consumed[sem] = consumed.get(sem, 0) + amount
    return moves
