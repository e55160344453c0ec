"""How the interpreter names what the protocol reports: events by their
origins and loop iterations, boxes in buffer indices, semaphores by name
(`protocol.Namer`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from copyir.errors import CopyIRError, CopyIRWarning, Note
from copyir.expand import Trace
from copyir.stream import Origin, Stream


@dataclass(frozen=True)
class Namer:
    """Events by their origins and iterations, boxes in buffer indices."""

    stream: Stream
    trace: Trace

    def origin(self, event: int) -> Origin:
        return self.stream.origin(int(self.trace.row[event]))

    def fail(
        self, event: int, message: str, notes: tuple[Note, ...] = ()
    ) -> CopyIRError:
        return self.trace.fail(self.stream, event, message, notes)

    def warning(self, event: int, message: str) -> CopyIRWarning:
        """A warning at an event, worded and located as `fail`'s error."""
        error = self.fail(event, message)
        return CopyIRWarning(str(error), error.loc)

    def site(self, event: int) -> Note:
        return Note("", self.origin(event).loc)

    def iteration(self, event: int) -> str:
        return self.trace.iteration(self.stream, event)

    def where(self, event: int) -> str:
        iteration = self.trace.iteration(self.stream, event)
        return f"{self.origin(event)}" + (f" at {iteration}" if iteration else "")

    def region(self, buffer: int, lo: np.ndarray, hi: np.ndarray) -> str:
        b = self.stream.buffers[buffer]
        parts = [f"{lo[d]}:{hi[d]}" for d in range(len(b.shape))]
        return f"{b.name}[{', '.join(parts)}]"

    def element(self, buffer: int, index: tuple[int, ...]) -> str:
        b = self.stream.buffers[buffer]
        return f"{b.name}[{', '.join(map(str, index[: len(b.shape)]))}]"

    def buffer_name(self, buffer: int) -> str:
        return self.stream.buffers[buffer].name

    def semaphore(self, sem: int) -> str:
        return self.stream.sem_name(sem)
