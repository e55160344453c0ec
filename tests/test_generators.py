"""The random-program generators make the classes of input that found bugs.

Defects have lived in classes no generator made: a kernel with no
loop and a kernel-level `when`, pipelines sharing inputs or clashing with
a user's names, parallel grids that carry state, indices near 64 bits.
Each generator is drawn 500 times with a fixed seed here, and each class
it owns must appear at least 10 times, so that the tests built on the
generators keep trying them.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from loop_programs import loop_programs, parallel_faults
from pipeline_programs import pipelines

DRAWS = 500
AT_LEAST = 10

GENERATORS = {
    "loop_programs": (
        loop_programs(),
        lambda program: program.classes,
        {
            "loop-free with a kernel-level when",
            "parallel grid",
            "indices near 64 bits",
        },
    ),
    "parallel_faults": (
        parallel_faults(),
        lambda fault: fault.program.classes,
        {
            "parallel grid with carried state",
            "parallel grid writing HBM twice",
            "parallel grid with a DMA across iterations",
        },
    ),
    "pipelines": (
        pipelines(),
        lambda pipeline: pipeline.classes,
        {
            "pipelines sharing inputs",
            "made name clashing with a user name",
            "parallel prefix",
        },
    ),
}


@pytest.mark.parametrize("name", GENERATORS)
def test_each_generator_makes_its_classes_often(name):
    strategy, classes_of, wanted = GENERATORS[name]
    seen: Counter[str] = Counter()

    @settings(
        max_examples=DRAWS,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def draw(example):
        seen.update(classes_of(example))

    draw()
    assert {c: seen[c] for c in wanted if seen[c] < AT_LEAST} == {}, seen
