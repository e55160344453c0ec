"""What the command line pays beyond the API: pass option docs read from
source only for `--list-passes`, the DMA count of `copyir run` without
expanding the stream, and no collection of the IR at exit."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from copyir.passes import (
    LOWERING,
    PASSES,
    PipelineError,
    option_names,
    options,
    parse_pipeline,
)

import copyir
from copyir import cli, errors
from copyir.api import lowered_stream, pipeline
from copyir.expand import executions, expand
from copyir.stream import START

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

LIST_PASSES = """\
verify                Check the program; report its first error at its line.
                        target: str = default
                          The target whose capacities bound each buffer.
expand-pipelines      Lower each pipeline to loops of asynchronous window copies.
expand-pytree-copies  Expand each sync_copy into a semaphore, the starts, then the waits.
expand-min-max        Split each op that reads a min or max index into its affine pieces.
expand-windows        Turn BufferedRefs into window buffers and their copies into DMAs.
assign-addresses      Lay out buffers in their memory spaces and number the semaphores.
                        target: str = default
                          A built-in target's name (default, small) or a TOML file.
cse                   Merge equal views, semaphore indices and index values (xDSL's CSE).
convert-copy-to-dma   Lower address-assigned kernels to DMA programs, loops kept as dma.loop.
"""


@pytest.fixture
def no_source_reading(monkeypatch):
    """Reading a pass's source fails the test."""

    def refuse(obj):
        raise AssertionError(f"read the source of {obj!r}")

    monkeypatch.setattr(inspect, "getsource", refuse)


def test_lowering_reads_no_pass_source(no_source_reading):
    program = copyir.lower(EXAMPLES / "double_buffer.cpy")
    assert program.sym_name.data == "double_buffer"


def test_pipeline_options_checked_without_reading_source(no_source_reading):
    passes = parse_pipeline("assign-addresses{target=small},convert-copy-to-dma")
    assert [p.name for p in passes] == ["assign-addresses", "convert-copy-to-dma"]
    with pytest.raises(PipelineError) as err:
        parse_pipeline("assign-addresses{tagret=small}")
    hint = errors.DID_YOU_MEAN_SUFFIX.format(match="target")
    assert str(err.value) == errors.UNKNOWN_PASS_OPTION.format(
        option="tagret", name="assign-addresses", hint=hint, known="target"
    )


def test_option_names_are_the_documented_options():
    for name in PASSES:
        assert option_names(name) == [option.name for option in options(name)]


def test_option_docs_are_read_once(monkeypatch):
    options.cache_clear()
    reads = []
    real = inspect.getsource
    monkeypatch.setattr(
        inspect, "getsource", lambda obj: reads.append(obj) or real(obj)
    )
    first = [options(name) for name in PASSES]
    second = [options(name) for name in PASSES]
    assert first == second
    assert len(reads) == len(PASSES)


def test_list_passes_output_is_unchanged(capsys):
    assert cli.main(["opt", "--list-passes"]) == 0
    assert capsys.readouterr().out == LIST_PASSES


@pytest.mark.parametrize(
    "path", sorted(EXAMPLES.glob("*.cpy")), ids=lambda path: path.stem
)
def test_executions_count_what_expanding_counts(path):
    module = copyir.parse(path.read_text(), str(path))
    for kernel in copyir.kernels(module):
        stream = lowered_stream(module, kernel.kernel_name)
        expanded = int((stream.instructions["op"][expand(stream).row] == START).sum())
        assert executions(stream, START) == expanded


def test_command_leaves_the_heap_to_exit(monkeypatch):
    """`command` returns main's status after freezing the heap, so that
    Python's collection at exit does not walk the IR."""
    events = []
    monkeypatch.setattr(cli, "main", lambda: events.append("main") or 1)
    monkeypatch.setattr(cli.gc, "freeze", lambda: events.append("freeze"))
    assert cli.command() == 1
    assert events == ["main", "freeze"]


def test_python_m_copyir_runs_through_command(tmp_path):
    out = tmp_path / "out.npz"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "copyir",
            "run",
            str(EXAMPLES / "double_buffer.cpy"),
            "--fill-inputs",
            "iota",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert out.exists()
    missing = subprocess.run(
        [sys.executable, "-m", "copyir", "run", str(tmp_path / "none.cpy")],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == cli.EXIT_USAGE


def test_the_lowering_is_the_default_pipeline(no_source_reading):
    assert [p.name for p in pipeline()] == list(LOWERING)
