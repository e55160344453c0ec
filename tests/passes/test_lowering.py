"""The lowering: passes, the DMA stream, its text and binary forms, and the
opt and lower commands."""

from __future__ import annotations

import gc
import io
import re

import numpy as np
import pytest
from conftest import EXAMPLES, VALID_EXAMPLES, expected_error

import copyir
from copyir import errors
from copyir.api import apply_passes, pipeline
from copyir.cli import main
from copyir.dialects.copy import BufferedCopyOp
from copyir.errors import CopyIRError
from copyir.stream import (
    COMPUTE,
    INVALIDATE,
    RELEASE,
    RELEASE_SEM,
    START,
    WAIT,
    from_program,
    load_npz,
    parse_dma,
    save_npz,
    to_program,
)
from copyir.testing import module_difference

LOWER_ERRORS = sorted((EXAMPLES / "invalid" / "lower").glob("*.cpy"))


def lowered(path, **kw):
    module = copyir.parse(path.read_text(), filename=str(path))
    return copyir.lower(module, **kw)


def stream_of(path, **kw):
    return copyir.to_stream(lowered(path, **kw))


def test_pytree_copy_is_all_starts_then_all_waits_on_one_semaphore():
    stream = stream_of(EXAMPLES / "roundtrip.cpy")
    table = stream.instructions
    assert list(table["op"]) == [START, START, WAIT, WAIT] * 2
    assert list(table["sem"]) == [0] * 4 + [1] * 4
    details = [stream.origin(i).detail for i in range(len(table))]
    assert details == ["leaf [0]", "leaf [1]"] * 2 + ["leaf ['x']", "leaf ['y']"] * 2
    assert [stream.origin(i).loc.line for i in range(len(table))] == [11] * 4 + [12] * 4
    waits = table[table["op"] == WAIT]
    assert list(waits["bytes"]) == [16 * 128 * 4, 8 * 256 * 4] * 2


def test_worked_example_block_7_2():
    stream = stream_of(EXAMPLES / "windows.cpy")
    x, _, bx = stream.buffers
    rows = [
        i
        for i in range(len(stream.instructions))
        if stream.origin(i).detail.startswith("block (7, 2)")
    ]
    start, wait = (stream.instructions[i] for i in rows[:2])
    assert start["op"] == START and wait["op"] == WAIT
    assert list(start["shape"]) == [104, 128]
    assert start["src_address"] == x.address + (896 * 384 + 256) * 4
    assert list(start["src_strides"]) == [384, 1]
    slot = int(stream.origin(rows[0]).detail.split()[-1])
    assert start["dst_address"] == bx.address + slot * 128 * 128 * 4
    assert list(start["dst_strides"]) == [128, 1]
    assert wait["bytes"] == 53_248


@pytest.mark.parametrize("path", VALID_EXAMPLES, ids=lambda p: p.name)
def test_every_instruction_leads_back_to_its_statement(path):
    stream = stream_of(path)
    source = path.read_text().splitlines()
    assert len(stream.instructions) > 0
    for i in range(len(stream.instructions)):
        origin = stream.origin(i)
        assert origin.loc.file == str(path)
        line = source[origin.loc.line - 1][origin.loc.col - 1 :]
        if stream.instructions["op"][i] == COMPUTE:
            # `y[...] = ...`, `acc += xw`, or the padding a cut block leaves
            # (a window copy's, or a pipeline's)
            computation = r"\w+(\[[^\]]*\])*\s*[-+*/]?=|(buffered_copy|pipeline)\b"
            assert re.match(computation, line), line
            continue
        if line.startswith("scope"):  # invalidations at its start, releases at its end
            assert stream.instructions["op"][i] in (INVALIDATE, RELEASE, RELEASE_SEM)
            continue
        dma = (
            r"(copy_start|copy_wait|dma|sync_copy|buffered_copy|pipeline)\b"
            r"|\w+\.(start|wait)\("
        )
        assert re.match(dma, line), line
        if stream.instructions["op"][i] == INVALIDATE:  # a pipeline's output window
            assert line.startswith("pipeline"), line
            continue
        if line.startswith(("buffered_copy", "pipeline")):
            assert origin.detail.startswith("block ("), (line, origin)
        source_side = line.split("->")[0].removeprefix("sync_copy").lstrip()
        if line.startswith("sync_copy") and source_side.startswith(("(", "[", "{")):
            assert origin.detail.startswith("leaf [")  # a pytree's leaf, not ds(...)


@pytest.mark.parametrize("path", VALID_EXAMPLES, ids=lambda p: p.name)
def test_stream_text_and_binary_round_trip(path):
    program = lowered(path)
    stream = copyir.to_stream(program)
    text = copyir.dma_text(program)
    assert from_program(parse_dma(text, "again.dma")) == stream
    binary = io.BytesIO()
    save_npz(stream, binary)
    binary.seek(0)
    assert load_npz(binary) == stream
    assert from_program(to_program(stream)) == stream
    assert copyir.dma_text(to_program(stream)) == text


def test_declarations_in_any_order_round_trip():
    """A semaphore declared before a buffer (as an expanded pipeline does):
    the stream holds buffers, then semaphores, and so does the lowering."""
    text = (
        "kernel k(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {\n"
        "  s = semaphore\n  buf = alloc f32[8, 128] @vmem\n"
        "  copy_start x -> buf, s\n  copy_wait x -> buf, s\n}\n"
    )
    program = copyir.lower(text)
    assert copyir.dma_text(to_program(copyir.to_stream(program))) == copyir.dma_text(
        program
    )


def test_round_trip_sees_a_changed_instruction():
    program = lowered(EXAMPLES / "manual.cpy")
    text = copyir.dma_text(program)
    changed = text.replace("bytes 32768", "bytes 32764", 1)
    assert changed != text
    assert from_program(parse_dma(changed, "x.dma")) != copyir.to_stream(program)


def test_lowering_leaves_the_callers_module_alone():
    path = EXAMPLES / "windows.cpy"
    module = copyir.parse(path.read_text(), filename=str(path))
    before = copyir.parse(path.read_text(), filename=str(path))
    copyir.lower(module)
    assert module_difference(module, before) is None


@pytest.mark.parametrize("path", LOWER_ERRORS, ids=lambda p: p.name)
def test_lowering_errors_through_the_api(path):
    line, message = expected_error(path)
    module = copyir.parse(path.read_text(), filename=str(path))
    copyir.verify(module)
    with pytest.raises(CopyIRError) as caught:
        copyir.lower(module)
    assert str(caught.value) == message
    assert caught.value.loc.line == line


@pytest.mark.parametrize("path", LOWER_ERRORS, ids=lambda p: p.name)
def test_lowering_errors_through_the_cli(path, capsys):
    line, message = expected_error(path)
    assert main(["lower", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert re.match(
        rf"{re.escape(str(path))}:{line}:\d+: error: {re.escape(message)}\n", err
    )


def test_small_target_runs_out_of_vmem():
    text = (
        "kernel k(x: f32[8] @hbm) {\n  a = alloc f32[200, 1024] @vmem\n"
        "  b = alloc f32[100, 1024] @vmem\n}\n"
    )
    module = copyir.parse(text, filename="t.cpy")
    with pytest.raises(CopyIRError) as caught:
        copyir.lower(module, target="small")
    assert str(caught.value) == errors.DOES_NOT_FIT.format(
        name="b",
        size=100 * 1024 * 4,
        space="vmem",
        free=(1 << 20) - 200 * 1024 * 4,
        capacity=1 << 20,
        target="small",
    )
    assert caught.value.loc.line == 3


def test_the_verifier_bounds_each_buffer_by_the_chosen_target(tmp_path):
    text = "kernel k(x: f32[8] @hbm) {\n  a = alloc u8[201326592] @vmem\n}\n"
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text))
    assert str(caught.value) == errors.OVER_CAPACITY.format(
        name="a", size=3 << 26, space="vmem", capacity=1 << 27, target="default"
    )
    big = tmp_path / "big.toml"
    big.write_text(
        '[hbm]\ncapacity = "64 GiB"\n[vmem]\ncapacity = "1 GiB"\n[smem]\ncapacity = 4096\n'
    )
    copyir.verify(copyir.parse(text), target=str(big))
    program = copyir.lower(copyir.parse(text), target=str(big))
    assert copyir.to_stream(program).target == "big"
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text), target="small")
    assert str(caught.value).endswith("capacity of 1048576 bytes in target small")


def test_target_from_a_toml_file(tmp_path):
    target = tmp_path / "tiny.toml"
    target.write_text(
        'name = "tiny"\n[hbm]\ncapacity = "1 MiB"\nalignment = 64\n'
        '[vmem]\ncapacity = 4096\nalignment = 1024\n[smem]\ncapacity = "1 KiB"\n'
    )
    text = (
        "kernel k(x: f32[3] @hbm, y: f32[3] @hbm) {\n  a = alloc u8[1] @vmem\n"
        "  b = alloc u8[1] @vmem\n  sync_copy x -> y\n}\n"
    )
    stream = copyir.to_stream(copyir.lower(copyir.parse(text), target=str(target)))
    assert stream.target == "tiny"
    assert [b.address for b in stream.buffers] == [0, 64, 0, 1024]
    module = copyir.parse(text.replace("u8[1] @vmem\n  b", "u8[4000] @vmem\n  b"))
    with pytest.raises(CopyIRError) as caught:
        copyir.lower(module, target=str(target))
    assert str(caught.value) == errors.DOES_NOT_FIT.format(
        name="b", size=1, space="vmem", free=96, capacity=4096, target="tiny"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("name = 'x'\n", "Target x has no [hbm] table"),
        (
            "[hbm]\ncapacity = 1\n[vmem]\ncapacity = 1\nalignment = 3\n[smem]\ncapacity = 1\n",
            "Target bad: vmem.alignment must be a power of two, got 3",
        ),
        (
            "[hbm]\ncapacity = 'lots'\n",
            "Target field hbm.capacity must be a byte count such as 4096 or '64 MiB', got 'lots'",
        ),
    ],
)
def test_bad_target_files(tmp_path, content, message):
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(CopyIRError) as caught:
        copyir.lower(copyir.parse("kernel k() {}\n"), target=str(path))
    assert str(caught.value) == message


def test_conversion_needs_addresses_first():
    module = copyir.parse("kernel k(x: f32[4]) {\n  a = alloc f32[4] @vmem\n}\n")
    with pytest.raises(CopyIRError) as caught:
        apply_passes(module, pipeline("convert-copy-to-dma"))
    assert str(caught.value) == errors.NEEDS_PASS.format(
        pass_name="convert-copy-to-dma",
        before="assign-addresses",
        why="buffers have no addresses",
    )


@pytest.mark.parametrize(
    ("body", "op", "before"),
    [
        ("sync_copy x -> y", "copy.sync_copy", "expand-pytree-copies"),
        (
            "pipeline grid=(2,)\n"
            "      in x block=(2,) index=(i) -> (i)\n"
            "      out y block=(2,) index=(i) -> (i)\n"
            "      (xw, yw) {\n"
            "    yw[...] = xw\n"
            "  }",
            "copy.pipeline",
            "expand-pipelines",
        ),
    ],
)
def test_conversion_names_the_pass_that_expands_each_op(body, op, before):
    module = copyir.parse(f"kernel k(x: f32[4], y: f32[4]) {{\n  {body}\n}}\n")
    with pytest.raises(CopyIRError) as caught:
        apply_passes(module, pipeline("assign-addresses,convert-copy-to-dma"))
    assert str(caught.value) == errors.NEEDS_PASS.format(
        pass_name="convert-copy-to-dma",
        before=before,
        why=f"{op} has no DMA form yet",
    )
    assert caught.value.loc.line == 2


def test_expand_windows_checks_the_grid_itself():
    text = "kernel k(x: f32[100]) {\n  bx = buffered_ref x, block=(32,)\n}\n"
    module = copyir.parse(text)
    kernel = module.ops.first
    bref = next(iter(kernel.body.block.ops)).result
    kernel.body.block.add_op(BufferedCopyOp(kernel.params[0], bref, [4]))
    with pytest.raises(CopyIRError) as caught:
        apply_passes(module, pipeline("expand-windows"))
    assert str(caught.value) == errors.BLOCK_INDEX_OUT_OF_BOUNDS.format(
        index=4, dim=0, bref="bx", extent=4
    )


def test_empty_tree_lowers_to_nothing():
    text = "kernel k(x: f32[4]) {\n  sync_copy () -> ()\n  sync_copy [] -> []\n}\n"
    assert len(copyir.to_stream(copyir.lower(copyir.parse(text))).instructions) == 0


def test_add_and_priority_reach_the_stream():
    text = (
        "kernel k(x: f32[4], y: f32[4]) {\n  s = semaphore\n"
        "  copy_start x -> y, s, add, priority=1\n  copy_wait x -> y, s\n"
        "  sync_copy (x,) -> (y,), add\n}\n"
    )
    table = copyir.to_stream(copyir.lower(copyir.parse(text))).instructions
    starts = table[table["op"] == START]
    assert list(starts["add"]) == [True, True]
    assert list(starts["priority"]) == [1, 0]


def test_corrupt_binary_stream_is_one_error(tmp_path):
    path = tmp_path / "bad.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CopyIRError) as caught:
        load_npz(str(path), str(path))
    assert str(caught.value).startswith(f"Cannot read DMA stream {path}: ")
    del caught  # its context's traceback holds what numpy opened
    gc.collect()  # so that a file left open warns here, as an error


def test_binary_stream_with_bad_codes_is_refused():
    stream = stream_of(EXAMPLES / "manual.cpy")
    stream.instructions["sem"][0] = 99
    binary = io.BytesIO()
    save_npz(stream, binary)
    binary.seek(0)
    loaded = load_npz(binary, "x.npz")
    with pytest.raises(CopyIRError) as caught:
        loaded.validate()
    assert (
        str(caught.value)
        == "Malformed DMA stream: instruction 0: semaphore 99 in a program of 1"
    )
    assert str(caught.value.loc) == "x.npz:1:1"


# -- the command line ---------------------------------------------------------


def test_lower_writes_text_and_binary(tmp_path, capsys):
    path = EXAMPLES / "windows.cpy"
    text_out, npz_out = tmp_path / "w.dma", tmp_path / "w.npz"
    assert main(["lower", str(path), "-o", str(text_out)]) == 0
    assert main(["lower", str(path), "-o", str(npz_out)]) == 0
    assert main(["lower", str(path)]) == 0
    stdout = capsys.readouterr().out
    assert stdout == text_out.read_text()
    assert from_program(parse_dma(stdout, "w.dma")) == load_npz(str(npz_out))
    # 96 DMAs, and the padding of the 3 cut blocks copied in
    assert np.load(npz_out)["instructions"].shape == (99,)


def test_lower_npz_needs_an_output_file(capsys):
    assert main(["lower", "--format", "npz", str(EXAMPLES / "manual.cpy")]) == 2
    assert capsys.readouterr().err == (
        "copyir: error: the npz form needs -o FILE (or -o - for standard output)\n"
    )


def test_lower_reports_the_verifier_error_first(capsys):
    path = EXAMPLES / "invalid" / "neither_buffered.cpy"
    assert main(["lower", str(path)]) == 1
    assert capsys.readouterr().err.startswith(
        f"{path}:7:3: error: One of src or dst must be a BufferedRef."
    )


def test_lower_needs_a_kernel_choice(capsys, tmp_path):
    path = tmp_path / "two.cpy"
    path.write_text("kernel a() {}\nkernel b() {}\n")
    assert main(["lower", str(path)]) == 1
    assert "choose one with --kernel" in capsys.readouterr().err
    assert main(["lower", "--kernel", "b", str(path)]) == 0
    assert 'dma.program "b"' in capsys.readouterr().out


def test_unknown_target_is_a_usage_error(capsys):
    assert main(["lower", "--target", "tpu9000", str(EXAMPLES / "manual.cpy")]) == 2
    assert capsys.readouterr().err == (
        "copyir: error: Unknown target tpu9000 (built-in: default, small; or a .toml file)\n"
    )


def test_opt_lists_passes(capsys):
    assert main(["opt", "--list-passes"]) == 0
    out = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in out if not line.startswith(" ")]
    assert names == [
        "verify",
        "expand-pipelines",
        "expand-pytree-copies",
        "expand-min-max",
        "expand-windows",
        "assign-addresses",
        "cse",
        "convert-copy-to-dma",
    ]
    assert all(len(line.split(maxsplit=1)) == 2 for line in out)


@pytest.mark.parametrize(
    "spec", ["no-such-pass", "assign-addresses{target", "expand-windows{x=1}"]
)
def test_opt_bad_pipeline_is_a_usage_error(spec, capsys):
    assert main(["opt", "-p", spec, str(EXAMPLES / "manual.cpy")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("copyir: error: ") and "Traceback" not in err


def test_opt_prints_the_ir_after_each_pass(capsys):
    path = str(EXAMPLES / "roundtrip.cpy")
    spec = "expand-pytree-copies,assign-addresses"
    assert main(["opt", "-p", spec, "--print-ir-after-all", "--emit", "cpy", path]) == 0
    out, err = capsys.readouterr()
    assert err.count("// -----// IR Dump After") == 2
    assert "IR Dump After expand-pytree-copies" in err
    assert out.startswith("kernel roundtrip(")
    assert "# sem 0" in out


def test_opt_each_pass_alone(capsys):
    path = str(EXAMPLES / "roundtrip.cpy")
    for name in (
        "verify",
        "expand-pytree-copies",
        "expand-windows",
        "assign-addresses",
    ):
        assert main(["opt", "-p", name, path]) == 0, name
        assert "copy.kernel" in capsys.readouterr().out
