"""Generated loop programs give the same bits on both paths: lowered to
the DMA stream (loops kept) and run on the checking interpreter in every
mode, and run directly on the reference path, which shares no index or
address arithmetic with the lowering.

The generator (tests/loop_programs.py) lists the classes it covers and
those it does not; this adds nothing to them but the comparison of every
parameter's final value, computed outputs included (the reference test can
only predict the outputs no computation writes).
"""

from __future__ import annotations

import pytest
from copyir.backends.interpreter import MODES
from copyir.backends.reference import run_reference
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_programs import FRAGMENTS, LoopProgram, loop_programs

import copyir

# Outputs the generator leaves partly unwritten keep poison on both paths.
pytestmark = pytest.mark.filterwarnings("ignore::copyir.errors.CopyIRWarning")


def check_agreement(program: LoopProgram, seed: int) -> None:
    module = program.parse()
    copyir.verify(module)
    inputs = program.random_inputs(seed)
    want = run_reference(module.ops.first, inputs)
    stream = copyir.to_stream(copyir.lower(program.parse()))
    for mode in MODES:
        got = copyir.run(stream, inputs, mode=mode, seed=seed)
        for name, value in want.items():
            assert got[name].tobytes() == value.tobytes(), f"{name} in {mode} mode"


@pytest.mark.parametrize("fragment", FRAGMENTS)
def test_each_fragment_agrees_on_both_paths(fragment):
    @settings(max_examples=8, deadline=None, database=None)
    @given(loop_programs(fragments=(fragment,)), st.integers(0, 2**16))
    def check(program, seed):
        check_agreement(program, seed)

    check()


@settings(max_examples=25, deadline=None)
@given(loop_programs(), st.integers(0, 2**16))
def test_generated_loop_programs_agree_on_both_paths(program, seed):
    check_agreement(program, seed)
