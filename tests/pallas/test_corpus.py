"""The corpus collector (benchmarks/corpus/collect.py) turns jax's vendored
Pallas TPU tests into units: one `pallas_call` execution each, with its
concrete operands, captured on the CPU in Pallas' TPU interpret mode.

One small vendored file is collected (a worker process, a few seconds), and
its units are checked against what its tests do.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("absl")

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus"
sys.path.insert(0, str(CORPUS))

import collect  # noqa: E402

STATE = "tests/pallas/tpu_pallas_state_test.py"


@pytest.fixture(scope="module")
def outcomes() -> dict[str, collect.Outcome]:
    found = collect.collect([STATE], test_timeout=120, on_unit="collect:describe")
    return {o.test_id.removeprefix(f"{STATE}::"): o for o in found}


def test_every_parameterisation_is_a_case(outcomes: dict[str, collect.Outcome]) -> None:
    # 14 test methods; test_capture_scalar has 6 absl parameterisations and
    # test_kernel_with_output_memory_space 4.
    assert len(outcomes) == 23 + 3
    scalar = [t for t in outcomes if t.startswith("CoreMapTest.test_capture_scalar")]
    assert len(scalar) == 6
    assert "core_type=SC_VECTOR_SUBCORE" in scalar[-1]


def test_a_dma_kernel_is_captured_with_its_operands(
    outcomes: dict[str, collect.Outcome],
) -> None:
    outcome = outcomes["PallasCallStatefulTest.test_basic_stateful_kernel"]
    assert (outcome.status, outcome.device) == ("ok", "tpu")
    [unit] = outcome.units
    assert (unit.index, unit.name) == (0, "copy_kernel")
    assert unit.operands == (((8, 128), "int32"), ((8, 128), "int32"))
    # The operands as the call received them: x = arange, y = zeros_like(x).
    assert unit.result["sums"] == (float(np.arange(8 * 128).sum()), 0.0)
    assert unit.result["grid"] == ()
    assert unit.result["equations"] > 0


def test_scalar_prefetch_operands_come_first(
    outcomes: dict[str, collect.Outcome],
) -> None:
    outcome = outcomes[
        "PallasCallStatefulTest.test_basic_stateful_kernel_with_scalar_prefetch"
    ]
    [unit] = outcome.units
    assert unit.operands[0] == ((1,), "int32")
    assert [shape for shape, _ in unit.operands[1:]] == [(1, 8, 128), (8, 128)]


def test_cases_that_do_not_run_say_why(outcomes: dict[str, collect.Outcome]) -> None:
    skipped = outcomes[
        "CoreMapTest.test_capture_scalar4 (core_type=SC_VECTOR_SUBCORE, use_tc_tiling_on_sc=True)"
    ]
    assert (skipped.status, skipped.reason) == (
        "skipped",
        "Copies to SMEM on TEC not supported. (as the CPU: Only supported on TPU v4+)",
    )
    failed = [o for o in outcomes.values() if o.status == "failed"]
    assert failed
    assert all(o.reason for o in failed)


def test_past_the_budget_nothing_runs() -> None:
    [outcome] = collect.collect([STATE], budget=0)
    assert (outcome.status, outcome.reason) == ("not run", "budget (not loaded)")


def test_doc_pages_split_into_their_cells() -> None:
    cases = collect.doc_cells("docs/pallas/tpu/pipelining.py")
    assert [c.test_id.split("::")[1] for c in cases][:2] == [
        "pipelining.md:30",
        "pipelining.md:114",
    ]
    # The page's ```python snippets are not cases.
    assert all("[snippet]" not in c.test_id for c in cases)
