"""Bugs found in review, each pinned by the smallest program that showed it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES
from copyir.backends.interpreter import fill_inputs
from copyir.backends.reference import run_reference

import copyir
from copyir import errors
from copyir.cli import main
from copyir.errors import CopyIRError
from copyir.stream import read_dma


def agree(text: str, inputs: dict) -> dict:
    module = copyir.parse(text)
    expected = run_reference(module.ops.first, inputs)
    got = copyir.run(module, inputs)
    for name, value in expected.items():
        assert np.ascontiguousarray(got[name]).tobytes() == value.tobytes(), name
    return got


@pytest.mark.parametrize(
    "text",
    [
        # A rank-0 ref, copied by a DMA and through a trivial window.
        "kernel k(x: f32[] @hbm, y: f32[] @hbm) {\n  s = semaphore\n"
        "  copy_start x -> y, s\n  copy_wait x -> y, s\n}\n",
        "kernel k(x: f32[] @hbm, y: f32[] @hbm) {\n  b = buffered_ref x, block=()\n"
        "  buffered_copy x -> b\n  buffered_copy b -> y\n}\n",
        # Every dimension indexed, and an all-squeezed window.
        "kernel k(x: f32[4] @hbm, y: f32[4] @hbm) {\n  s = semaphore\n"
        "  copy_start x[2] -> y[1], s\n  copy_wait x[2] -> y[1], s\n}\n",
        "kernel k(x: f32[4] @hbm, y: f32[4] @hbm) {\n  b = buffered_ref x, block=(None,), buffers=1\n"
        "  buffered_copy x -> b[2]\n  buffered_copy b[2] -> y\n}\n",
    ],
)
def test_scalars_run_in_both_paths(text):
    shape = (4,) if "f32[4]" in text else ()
    x = np.arange(np.prod(shape, dtype=int), dtype=np.float32).reshape(shape) + 3
    agree(text, {"x": x})


def test_first_unwritten_element_of_an_indexed_view():
    text = (
        "kernel k(x: f32[8] @hbm, y: f32[5] @hbm) {\n  buf = alloc f32[4, 8] @vmem\n"
        "  sync_copy x[0:2] -> buf[2, 0:2]\n  sync_copy buf[2, 0:5] -> y\n}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.run(copyir.parse(text), {"x": np.zeros(8, np.float32)})
    assert str(caught.value).endswith("(first unwritten: buf[2, 2])")


@pytest.mark.parametrize("name", ["file", "allow_pickle", "args"])
def test_outputs_keep_every_parameter_name(name, tmp_path):
    path = tmp_path / "p.cpy"
    path.write_text(
        f"kernel k({name}: f32[8] @hbm, out: f32[8] @hbm) {{\n  sync_copy {name} -> out\n}}\n"
    )
    out = tmp_path / "o.npz"
    assert main(["run", str(path), "--fill-inputs", "iota", "--output", str(out)]) == 0
    assert sorted(np.load(out).files) == sorted([name, "out"])


def test_rerun_with_named_input_files(tmp_path, capsys):
    np.savez(
        tmp_path / "x.npz", x=np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    )
    out = tmp_path / "out.npz"
    args = ["run", str(EXAMPLES / "manual.cpy"), "--input", f"x={tmp_path / 'x.npy'}"]
    np.save(tmp_path / "x.npy", np.arange(64 * 128, dtype=np.float32).reshape(64, 128))
    assert main([*args, "--output", str(out)]) == 0
    assert main([*args, "--output", str(out)]) == 0  # the output exists now
    bundle = ["run", str(EXAMPLES / "manual.cpy"), "--input", str(tmp_path / "x.npz")]
    assert main([*bundle, "--output", str(tmp_path / "x.npz")]) == 2
    assert "refusing to overwrite the input file" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "lower"])
def test_unwritable_output_is_a_usage_error(command, capsys):
    args = [command, str(EXAMPLES / "manual.cpy"), "--fill-inputs", "zeros"]
    args = args[:2] + (
        ["--fill-inputs", "zeros", "--output"] if command == "run" else ["-o"]
    )
    assert main([*args, "/nonexistent/dir/out.npz"]) == 2
    assert capsys.readouterr().err == (
        "copyir: error: cannot write /nonexistent/dir/out.npz: No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            '"vmem" 0 [128, 1] f32 [32, 128] sem 0',
            '"vram" 0 [128, 1] f32 [32, 128] sem 0',
            "Malformed DMA stream: unknown memory space 'vram'",
        ),
        (
            "f32 [32, 128] sem 0",
            "i7 [32, 128] sem 0",
            "Malformed DMA stream: unknown element type i7",
        ),
        (
            "[128, 1] f32 [32, 128] sem 0",
            "[128, 1, 1] f32 [32, 128] sem 0",
            "Malformed DMA stream: strides [128, 1, 1] for shape [32, 128]",
        ),
        (
            "f32 [32, 128] sem 0",
            "f32 [0, 128] sem 0",
            "Malformed DMA stream: bad shape [0, 128]",
        ),
        ("sem 0", "sem 7", "Malformed DMA stream: semaphore 7 in a program of 1"),
    ],
)
def test_malformed_dma_text_is_a_located_error(old, new, message, tmp_path, capsys):
    text = copyir.dma_text(
        copyir.lower(copyir.parse((EXAMPLES / "manual.cpy").read_text()))
    )
    assert old in text
    bad = tmp_path / "bad.dma"
    bad.write_text(text.replace(old, new, 1))
    assert main(["run", str(bad), "--fill-inputs", "zeros"]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith(f"{bad}:") and first.endswith(f"error: {message}")


def test_huge_buffers_in_a_binary_stream_are_refused(tmp_path):
    from copyir.stream import Buffer, load_npz, save_npz

    stream = copyir.to_stream(
        copyir.lower(copyir.parse((EXAMPLES / "manual.cpy").read_text()))
    )
    stream.buffers[0] = Buffer("x", "hbm", 0, "f32", (2**40, 2**40), True)
    path = tmp_path / "s.npz"
    save_npz(stream, path)
    loaded = load_npz(str(path), "s.npz")
    with pytest.raises(CopyIRError) as caught:
        loaded.validate()
    assert (
        str(caught.value) == "Malformed DMA stream: buffer x has a bad address or size"
    )
    assert str(caught.value.loc) == "s.npz:1:1"


def test_limits_on_semaphores_and_ranks():
    many = "kernel k(x: f32[8]) {\n  s = semaphore[1000000000]\n}\n"
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(many))
    assert str(caught.value) == errors.TOO_MANY_SEMAPHORES.format(
        name="s", count=10**9, limit=1 << 20
    )
    deep = "kernel k(x: f32[" + ", ".join(["1"] * 33) + "]) {}\n"
    with pytest.raises(CopyIRError) as caught:
        copyir.parse(deep)
    assert str(caught.value) == errors.RANK_TOO_LARGE.format(limit=32, rank=33)


def test_a_location_naming_a_device_is_not_read(tmp_path, capsys):
    path = tmp_path / "p.cpy"
    path.write_text(
        'kernel k(x: f32[8], y: f32[4]) {\n  sync_copy x -> y loc("/dev/zero":1:1)\n}\n'
    )
    assert main(["verify", str(path)]) == 1
    assert capsys.readouterr().err.startswith(
        "/dev/zero:1:1: error: DMA source and target shape mismatch.\nnote:"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "buf = alloc f32[8] @vmem\n  buf = y",
            "buf is defined twice (first at line 2)",
        ),
        ("buf = alloc f32[8] @vmem\n  x = buf", "x is defined twice (first at line 1)"),
    ],
)
def test_a_name_cannot_be_rebound(body, message):
    text = f"kernel k(x: f32[8], y: f32[8]) {{\n  {body}\n}}\n"
    with pytest.raises(CopyIRError) as caught:
        copyir.parse(text)
    assert str(caught.value) == message
    assert caught.value.loc.line == 3


def test_kernel_names_are_unique():
    text = "kernel a() {}\nkernel b() {}\nkernel a() {}\n"
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text))
    assert str(caught.value) == errors.DUPLICATE_KERNEL.format(name="a")
    assert caught.value.loc.line == 3


@pytest.mark.parametrize(
    ("op", "why"),
    [
        (
            '%t = "copy.sem_index"(%s) <{indices = array<i64: 1>}> : (!copy.sem_array<2x3>) -> !copy.sem',
            "Malformed view of s: its type should be semaphore[3]",
        ),
        (
            '%t = "copy.view"(%x) <{offsets = array<i64: 0>, sizes = array<i64: 2>, dropped = array<i64: 0>}> : (!copy.ref<4x4xf32, hbm>) -> !copy.ref<4xf32, hbm>',
            "Malformed view of x: an indexed dimension must have size 1",
        ),
    ],
)
def test_generic_views_are_checked(op, why):
    text = (
        "copy.kernel @k(%x : !copy.ref<4x4xf32, hbm>) {\n"
        "  %s = copy.semaphore : !copy.sem_array<2x3>\n"
        f"  {op}\n}}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, "t.mlir"))
    assert str(caught.value) == why
    assert caught.value.loc.line == 3


def test_fill_inputs_binds_every_parameter():
    stream = copyir.to_stream(
        copyir.lower(copyir.parse((EXAMPLES / "roundtrip.cpy").read_text()))
    )
    filled = fill_inputs(stream, {}, "iota")
    assert sorted(filled) == ["a", "b", "out_a", "out_b"]
    assert filled["b"].dtype == np.int32 and filled["b"][0, 3] == 3


def test_semaphores_keep_their_names_in_runtime_errors():
    text = (
        "kernel k(x: f32[4], y: f32[4]) {\n  sems = semaphore[2, 2]\n"
        "  copy_start x -> y, sems[1, 0]\n  copy_wait x -> y, sems[1, 1]\n}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.run(copyir.parse(text), {"x": np.zeros(4, np.float32)})
    assert str(caught.value) == errors.RUN_UNSATISFIABLE_WAIT.format(
        sem="sems[1, 1]", need=16, available=0
    )
    stream = copyir.to_stream(copyir.lower(copyir.parse(text)))
    assert [stream.sem_name(i) for i in range(4)] == [
        "sems[0, 0]",
        "sems[0, 1]",
        "sems[1, 0]",
        "sems[1, 1]",
    ]


def test_a_syntax_error_after_a_deep_nest_is_a_diagnostic():
    """Found by the fuzzer: the trial parse behind the missing-semaphore
    note copied the parse stack deeply, and a 1000-deep nest of brackets
    before the error exhausted the recursion."""
    nest = "(" * 1000 + "0" + ")" * 1000
    text = (
        "kernel k(x: f32[8] @hbm) {\n  buf = alloc f32[8] @vmem\n  s = semaphore\n"
        f"  copy_start x[{nest}:8] -> buf ((\n}}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.parse(text, "deep.cpy")
    assert str(caught.value) == "unexpected '('; expected ',', '[' or subscripts"
    assert caught.value.loc.line == 4


def test_a_semi_affine_map_is_a_located_error():
    """xDSL's affine parser raises NotImplementedError on `d0 * d1` (found by
    the stream fuzzer): the MLIR form and the `.dma` text say so, located."""
    text = (
        "copy.kernel @k(%x: !copy.ref<32x128xf32, hbm>) {\n"
        "  copy.pipeline grid(4, 2) in %x : !copy.ref<32x128xf32, hbm> block "
        "[8, 128] index affine_map<(d0, d1) -> (d0 * d1, 0)> buffers 2 (%xw, "
        "%i, %j) {\n  }\n}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.parse(text, filename="k.mlir", format="mlir")
    assert str(caught.value) == errors.SEMI_AFFINE
    assert caught.value.loc.line == 2
    path = EXAMPLES / "loop_windows.cpy"
    stream = copyir.dma_text(copyir.lower(copyir.parse(path.read_text(), str(path))))
    mutant = stream.replace("(d0 * 3)", "(d0 * d1)", 1)
    assert mutant != stream
    line = 1 + mutant[: mutant.index("(d0 * d1)")].count("\n")
    with pytest.raises(CopyIRError) as caught:
        read_dma(mutant, "k.dma")
    assert str(caught.value) == errors.SEMI_AFFINE
    assert caught.value.loc.line == line


HUGE_CONSTANT = """builtin.module {
  copy.kernel @k(%x: !copy.ref<8xf32, hbm>, %y: !copy.ref<8xf32, hbm>) {
    %s = copy.semaphore : !copy.sem
    copy.for %i in range(0, 4) {
      PLACE
    }
  }
}
"""


@pytest.mark.parametrize(
    "op, value",
    [
        (
            "copy.when [affine_set<(d0) : (d0 - 80000000000000000000000 == 0)>](%i) {\n"
            '  copy.dma "start" %x, %y, %s : !copy.ref<8xf32, hbm>, '
            "!copy.ref<8xf32, hbm>, !copy.sem\n}",
            -80000000000000000000000,
        ),
        (
            "%0 = copy.index affine_map<(d0) -> (d0 * 90000000000000000000000)>(%i)",
            90000000000000000000000,
        ),
    ],
)
def test_a_constant_past_64_bits_in_mlir_is_a_located_error(op, value):
    """Found by the fuzzer: a `copy.when` of MLIR text whose constant numpy
    cannot hold crashed the verifier with an OverflowError."""
    text = HUGE_CONSTANT.replace("PLACE", op)
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, "huge.mlir", format="mlir"))
    assert str(caught.value) == errors.INT_RANGE.format(value=value)
    assert (caught.value.loc.file, caught.value.loc.line) == ("huge.mlir", 5)
