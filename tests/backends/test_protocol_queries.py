"""`DmaProtocol`: the one object the interpreter, `verify --protocol`, the
completion models and a timing model ask what is in flight at an event,
what has finished, and what conflicts, on small streams whose answers are
known by hand (`programs.py`)."""

from __future__ import annotations

import numpy as np
import pytest
from copyir.backends.interpreter import Executable, check_stream, prepare
from copyir.backends.protocol import DmaProtocol
from programs import NEVER_WAITED, RACE, SHARED

from copyir import errors
from copyir.errors import CopyIRError
from copyir.stream import read_dma


def protocol_of(text: str) -> DmaProtocol:
    stream = read_dma(text, "queries.dma")
    return prepare(stream, frozenset({"x", "y"})).protocol


def listed(array: np.ndarray) -> list[int]:
    return [int(x) for x in array]


def test_each_dma_is_finished_by_the_wait_that_consumes_every_byte_before_it():
    protocol = protocol_of(SHARED)
    assert listed(protocol.starts) == [0, 1, 4, 6]
    assert listed(protocol.finish) == [3, 3, 5, 7]
    assert listed(protocol.finished_by(2)) == []  # half the bytes of s[0]
    assert listed(protocol.finished_by(3)) == [0, 1]
    assert listed(protocol.finished_by(5)) == [2]
    assert listed(protocol.finished_by(4)) == []  # a start finishes nothing
    assert listed(protocol.leftovers()) == []


@pytest.mark.parametrize(
    "event, in_flight, finished",
    [
        (0, [0], []),
        (1, [0, 1], []),
        (2, [0, 1], []),
        (3, [], [0, 1]),
        (4, [2], [0, 1]),
        (5, [], [0, 1, 2]),
        (6, [3], [0, 1, 2]),
        (7, [], [0, 1, 2, 3]),
    ],
)
def test_in_flight_and_finished_at_each_event(event, in_flight, finished):
    protocol = protocol_of(SHARED)
    assert listed(protocol.in_flight(event)) == in_flight
    assert listed(protocol.finished(event)) == finished


def test_windows_run_from_each_start_to_its_finishing_wait():
    protocol = protocol_of(SHARED)
    windows = protocol.windows()
    # Two rows per DMA, its source then its destination, with its window.
    assert listed(windows.start) == [0, 0, 1, 1, 4, 4, 6, 6]
    assert listed(windows.finish) == [3, 3, 3, 3, 5, 5, 7, 7]


def test_a_conflict_is_answered_without_raising_and_decided_as_a_race():
    protocol = protocol_of(RACE)
    conflict = protocol.race()
    assert conflict is not None
    # Rows: DMA d's source is row 2d, its destination 2d + 1. DMA 1 reads
    # buf[0:8] (row 2) while DMA 0, in flight, writes it (row 1).
    assert (conflict.later, conflict.earlier) == (2, 1)
    assert listed(protocol.in_flight(1)) == [0, 1]
    with pytest.raises(CopyIRError) as caught:
        protocol.decide()
    assert str(caught.value).startswith("Race: this DMA reads buf[0:8, 0:128]")


def test_a_correct_program_has_no_conflict():
    protocol = protocol_of(SHARED)
    assert protocol.race() is None
    assert protocol.self_overlap() is None
    assert protocol.unwritten() is None
    verdict = protocol.decide()
    assert listed(verdict.finish) == listed(protocol.finish)


def test_a_dma_never_waited_stays_in_flight_to_the_end():
    protocol = protocol_of(NEVER_WAITED)
    count = protocol.events.count
    assert listed(protocol.finish) == [2, count]
    assert listed(protocol.leftovers()) == [1]
    assert listed(protocol.in_flight(count - 1)) == [1]
    with pytest.raises(CopyIRError) as caught:
        protocol.decide()
    assert str(caught.value) == errors.RUN_LEFTOVERS.format(count=1)


def test_the_interpreter_and_the_data_free_check_ask_the_same_answers():
    stream = read_dma(SHARED, "queries.dma")
    protocol = protocol_of(SHARED)
    verdict = check_stream(stream)
    compiled = Executable(stream, {"x"}, "eager")
    for answer in (verdict, compiled.verdict):
        assert listed(answer.starts) == listed(protocol.starts)
        assert listed(answer.finish) == listed(protocol.finish)
