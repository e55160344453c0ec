"""Shared paths and helpers for copyir's tests."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, settings

# Generated tests are bounded by their count of examples, never by time: no
# deadline per example and no health check that times generation (both fail
# on a busy machine, or on a worker sharing its core).
settings.register_profile(
    "counted", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("counted")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
LOOP_EXAMPLES = frozenset(
    {
        "loop_clamp.cpy",
        "loop_compute.cpy",
        "loop_double_buffer.cpy",
        "loop_prologue_epilogue.cpy",
        "loop_sum.cpy",
        "loop_windows.cpy",
    }
)
"""The examples with loops, each with its numpy result in
tests/backends/test_reference_loops.py; like every example, they are lowered, run
and compared with the reference path by the other tests."""
PIPELINE_EXAMPLES = frozenset(
    {
        "pipeline_bounded.cpy",
        "pipeline_copy.cpy",
        "pipeline_element.cpy",
        "pipeline_half.cpy",
        "pipeline_inout.cpy",
        "pipeline_lookahead.cpy",
        "pipeline_nested.cpy",
        "pipeline_parallel.cpy",
        "pipeline_scale.cpy",
        "pipeline_sum.cpy",
        "pipeline_three_inputs.cpy",
    }
)
"""The examples with a `pipeline`, each with its numpy result in
tests/passes/test_expand_pipelines.py."""
VALID_EXAMPLES = sorted(EXAMPLES.glob("*.cpy"))
INVALID_EXAMPLES = sorted((EXAMPLES / "invalid").glob("*.*"))

_EXPECTED = re.compile(r"expected-error@\+(\d+) \{\{(.*)\}\}")


def expected_error(path: Path) -> tuple[int, str]:
    """The line and message an invalid example's annotation promises."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if match := _EXPECTED.search(line):
            return number + int(match.group(1)), match.group(2)
    raise AssertionError(f"{path} has no expected-error annotation")
