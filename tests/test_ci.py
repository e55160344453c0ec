"""CI itself: what `.ci/run` checks, and limits that must hold on a busy machine."""

from __future__ import annotations

from conftest import ROOT


def test_ci_runs_ruff_check_and_format_after_installing():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    install = lines.index('pip install --quiet -e ".[dev]"')
    assert lines.index("ruff check .") > install
    assert lines.index("ruff format --check .") > install
    assert lines.index("pytest") > lines.index("ruff format --check .")


def test_the_fuzz_time_limit_only_catches_hangs():
    import test_fuzz

    assert test_fuzz.TIME_LIMIT >= 10
    assert (
        "The limit only catches hangs" in (ROOT / "tests" / "test_fuzz.py").read_text()
    )
