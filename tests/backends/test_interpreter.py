"""Running programs: the interpreter agrees with the reference path, finds
the runtime errors, and never touches the caller's arrays."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT, VALID_EXAMPLES
from copyir.backends.interpreter import MODES, Executable, fill_inputs
from copyir.backends.reference import run_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copyir
from copyir import errors
from copyir.cli import main
from copyir.dtypes import BY_NAME, DTYPES
from copyir.errors import CopyIRError, CopyIRWarning
from copyir.expectations import expectations

RUN_ERRORS = sorted((EXAMPLES / "invalid" / "run").glob("*.*"))
PARTLY_WRITTEN = {
    "element_squeezed.cpy": errors.RUN_PARTLY_WRITTEN.format(
        name="y", unwritten=384, size=512, first="y[0, 0]"
    ),
    "pipeline_half.cpy": errors.RUN_UNWRITTEN_WINDOW.format(
        region="y[0:8, 0:128]", first="y[4, 0]"
    )
    + ", at block (i, 0) slot i % 2, at i = 0",
}
"""The examples that leave an output partly written, or write a pipeline
window back that the body wrote in part, on purpose, and the warning that
says so (every other example runs without one)."""


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return (
        a.shape == b.shape
        and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    )


def read_params(stream) -> set[str]:
    """The parameters some DMA reads: the ones a program needs as inputs."""
    starts = stream.instructions[stream.instructions["op"] == 0]
    params = [b for b in stream.buffers if b.param]
    return {
        b.name
        for b in params
        if any(
            b.address <= a < b.address + b.nbytes for a in starts["src_address"] if True
        )
    }


def check_agreement(module, inputs, seeds=(0, 1, 2)):
    kernel = module.ops.first
    expected = run_reference(kernel, inputs)
    stream = copyir.to_stream(copyir.lower(module))
    for mode in MODES:
        for seed in seeds if mode == "random" else (0,):
            got = copyir.run(stream, inputs, mode=mode, seed=seed)
            assert got.keys() == expected.keys()
            for name in expected:
                assert same_bits(got[name], expected[name]), (mode, seed, name)


@pytest.mark.parametrize("path", VALID_EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("fill", ["iota", "random"])
def test_examples_agree_with_the_reference(path, fill):
    module = copyir.parse(path.read_text(), filename=str(path))
    stream = copyir.to_stream(copyir.lower(module))
    inputs = {
        name: value
        for name, value in fill_inputs(stream, {}, fill, seed=3).items()
        if name in read_params(stream)
    }
    if path.name not in PARTLY_WRITTEN:
        check_agreement(module, inputs)
        return
    with pytest.warns(CopyIRWarning) as caught:
        check_agreement(module, inputs)
    assert {str(w.message) for w in caught} == {PARTLY_WRITTEN[path.name]}


def test_windows_example_copies_the_whole_array():
    path = EXAMPLES / "windows.cpy"
    x = np.random.default_rng(0).random((1000, 384), dtype=np.float32)
    out = copyir.run(copyir.parse(path.read_text(), str(path)), {"x": x})
    assert same_bits(out["y"], x)


def test_accumulate_adds():
    path = EXAMPLES / "accumulate.cpy"
    a = np.full((8, 128), 1.5, np.float32)
    b = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    out = copyir.run(copyir.parse(path.read_text(), str(path)), {"a": a, "b": b})
    assert same_bits(out["out"], a + b)


def test_one_large_dma_waited_by_smaller_descriptors():
    text = (
        "kernel k(x: f32[64, 128], y: f32[64, 128]) {\n  buf = alloc f32[64, 128] @vmem\n"
        "  s = semaphore\n  copy_start x -> buf, s\n  copy_wait x[0:16] -> buf[0:16], s\n"
        "  copy_wait x[16:64] -> buf[16:64], s\n  sync_copy buf -> y\n}\n"
    )
    x = np.random.default_rng(1).random((64, 128), dtype=np.float32)
    for mode in MODES:
        assert same_bits(copyir.run(copyir.parse(text), {"x": x}, mode=mode)["y"], x)


def test_add_uses_the_destination_dtype():
    text = (
        "kernel k(x: i8[4], y: i8[4]) {\n  s = semaphore\n"
        "  copy_start x -> y, s, add\n  copy_wait x -> y, s\n}\n"
    )
    x = np.array([100, 100, -128, 1], np.int8)
    y = np.array([100, 27, -1, 2], np.int8)
    out = copyir.run(copyir.parse(text), {"x": x, "y": y})["y"]
    assert out.dtype == np.int8
    assert list(out) == list((x.astype(np.int8) + y).astype(np.int8))


@pytest.mark.parametrize("path", RUN_ERRORS, ids=lambda p: p.name)
@pytest.mark.parametrize("mode", MODES)
def test_runtime_errors_through_the_api(path, mode):
    name = str(path.relative_to(ROOT))
    want = [e for e in expectations(path.read_text()) if e.severity == "error"]
    notes = [e for e in expectations(path.read_text()) if e.severity == "note"]
    (error,) = want
    if path.suffix == ".dma":
        from copyir.stream import from_program, parse_dma

        stream = from_program(parse_dma(path.read_text(), name))
    else:
        stream = copyir.to_stream(copyir.lower(copyir.parse(path.read_text(), name)))
    with pytest.raises(CopyIRError) as caught:
        copyir.run(stream, fill_inputs(stream, {}, "random"), mode=mode)
    assert str(caught.value) == error.text
    assert caught.value.loc.file == name
    assert caught.value.loc.line == error.line
    for note in notes:
        assert any(n.message == note.text for n in caught.value.notes)


@pytest.mark.parametrize("path", RUN_ERRORS, ids=lambda p: p.name)
def test_runtime_errors_through_the_cli(path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    name = str(path.relative_to(ROOT))
    (error,) = [e for e in expectations(path.read_text()) if e.severity == "error"]
    assert main(["run", "--fill-inputs", "random", name]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    first = err.splitlines()[0]
    assert re.fullmatch(
        rf"{re.escape(name)}:{error.line}:\d+: error: {re.escape(error.text)}", first
    )
    assert main(["run", "--fill-inputs", "zeros", "--verify-diagnostics", name]) == 0


def test_different_seeds_give_different_completion_orders():
    path = EXAMPLES / "double_buffer.cpy"
    stream = copyir.to_stream(copyir.lower(copyir.parse(path.read_text(), str(path))))
    runs = {
        seed: Executable(stream, {"x"}, "random", seed).completions for seed in range(8)
    }
    orders = {tuple(dma for _, dma in run) for run in runs.values()}
    assert len(orders) > 1  # the order of completion itself differs
    assert len({tuple(run) for run in runs.values()}) == len(runs)
    table = stream.instructions
    starts = [i for i in range(len(table)) if table["op"][i] == 0]
    eager = Executable(stream, {"x"}, "eager").completions
    assert eager == [(i, i) for i in starts]  # each DMA lands at its start
    on_wait = Executable(stream, {"x"}, "on_wait").completions
    assert [dma for _, dma in on_wait] == starts
    assert all(table["op"][moment] == 1 for moment, _ in on_wait)  # inside waits


def test_callers_arrays_are_never_modified():
    path = EXAMPLES / "accumulate.cpy"
    module = copyir.parse(path.read_text(), str(path))
    inputs = {
        "a": np.ones((8, 128), np.float32),
        "b": np.full((8, 128), 2, np.float32),
        "out": np.full((8, 128), 7, np.float32),
    }
    before = {k: v.copy() for k, v in inputs.items()}
    out = copyir.run(module, inputs)
    for name, value in inputs.items():
        assert same_bits(value, before[name])
    assert same_bits(out["out"], before["a"] + before["b"])
    # `a` is never written, so it is read in place and comes back read-only.
    assert not out["a"].flags.writeable
    assert np.shares_memory(out["a"], inputs["a"])
    assert not np.shares_memory(out["out"], inputs["out"])


def test_unwritten_memory_is_poisoned():
    text = (
        "kernel k(x: f32[2], y: f32[4], n: i32[3], u: u8[2], b: bool[1]) {\n"
        "  sync_copy x -> y[0:2]\n}\n"
    )
    with pytest.warns(CopyIRWarning) as caught:
        out = copyir.run(copyir.parse(text), {"x": np.array([1, 2], np.float32)})
    assert [str(w.message) for w in caught] == [
        errors.RUN_PARTLY_WRITTEN.format(name="y", unwritten=2, size=4, first="y[2]")
    ]
    assert list(out["y"][:2]) == [1, 2]
    assert out["y"][2:].view(np.uint32).tolist() == [0x7FC00000] * 2
    assert list(out["n"]) == [2**31 - 1] * 3
    assert list(out["u"]) == [255, 255]
    assert out["b"].view(np.uint8)[0] == 1


@pytest.mark.parametrize("dtype", [d.name for d in DTYPES])
def test_poison_is_pallas_interpret_modes_uninitialized_value(dtype):
    """Memory nobody wrote holds, bit for bit, what Pallas' TPU interpret
    mode fills it with: `get_uninitialized_value(dtype, "nan")` of
    `jax._src.pallas.mosaic.interpret.utils`, put in an array of the dtype
    by numpy as `interpret_pallas_call._get_with_padding` does."""
    utils = pytest.importorskip("jax._src.pallas.mosaic.interpret.utils")
    numpy = BY_NAME[dtype].numpy
    theirs = np.full(3, utils.get_uninitialized_value(numpy, "nan"), numpy)
    text = f"kernel k(x: {dtype}[1], y: {dtype}[4]) {{\n  sync_copy x -> y[0:1]\n}}\n"
    with pytest.warns(CopyIRWarning):
        out = copyir.run(copyir.parse(text), {"x": np.zeros(1, numpy)})
    assert out["y"][1:].tobytes() == theirs.tobytes()


def test_input_errors_name_the_parameter():
    module = copyir.parse((EXAMPLES / "roundtrip.cpy").read_text())
    with pytest.raises(CopyIRError) as caught:
        copyir.run(module, {"c": np.zeros(3)})
    assert str(caught.value) == errors.RUN_UNKNOWN_INPUT.format(
        name="c", kernel="roundtrip", params="a, b, out_a, out_b"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.run(module, {"a": np.zeros((16, 128))})
    assert str(caught.value) == errors.RUN_INPUT_MISMATCH.format(
        name="a", got="float64[16, 128]", want="f32[16, 128]"
    )


def test_unknown_mode():
    module = copyir.parse((EXAMPLES / "manual.cpy").read_text())
    with pytest.raises(CopyIRError) as caught:
        copyir.run(module, {"x": np.zeros((64, 128), np.float32)}, mode="lazy")
    assert str(caught.value) == errors.RUN_UNKNOWN_MODE.format(mode="lazy")


# -- the command line -----------------------------------------------------------


def test_run_with_npy_and_npz_inputs(tmp_path, capsys):
    a = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    b = np.arange(8 * 256, dtype=np.int32).reshape(8, 256)
    np.save(tmp_path / "a.npy", a)
    np.savez(tmp_path / "more.npz", b=b)
    files_before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    out = tmp_path / "out.npz"
    args = [
        "run",
        str(EXAMPLES / "roundtrip.cpy"),
        "--input",
        f"a={tmp_path / 'a.npy'}",
    ]
    args += [
        "--input",
        str(tmp_path / "more.npz"),
        "--output",
        str(out),
        "--mode",
        "on_wait",
    ]
    assert main(args) == 0
    result = np.load(out)
    assert sorted(result.files) == ["a", "b", "out_a", "out_b"]
    assert same_bits(result["out_a"], a) and same_bits(result["out_b"], b)
    for name, data in files_before.items():
        assert (tmp_path / name).read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.npy",
        "more.npz",
        "out.npz",
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("a=missing.npy", "cannot read missing.npy: No such file or directory"),
        ("corrupt.npz", "cannot read corrupt.npz: "),
        ("a=corrupt.npz", "corrupt.npz is not a .npy array"),
        ("=x.npy", "--input =x.npy: the name before = is empty"),
    ],
)
def test_bad_input_files_are_one_line_errors(
    spec, message, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corrupt.npz").write_bytes(b"PK\x03\x04garbage")
    np.save(tmp_path / "x.npy", np.zeros(3))
    assert main(["run", str(EXAMPLES / "roundtrip.cpy"), "--input", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"copyir: error: {message}")
    assert err.count("\n") == 1


def test_unmatched_input_name_from_the_cli(tmp_path, capsys):
    np.savez(tmp_path / "in.npz", zz=np.zeros(2))
    assert (
        main(
            [
                "run",
                str(EXAMPLES / "roundtrip.cpy"),
                "--input",
                str(tmp_path / "in.npz"),
            ]
        )
        == 2  # the command line is wrong, not the program
    )
    assert (
        "Input zz matches no parameter of kernel roundtrip" in capsys.readouterr().err
    )


def test_run_a_lowered_stream(tmp_path, capsys):
    path = EXAMPLES / "manual.cpy"
    x = np.random.default_rng(5).random((64, 128), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    for form in ("text", "npz"):
        lowered = tmp_path / ("m.dma" if form == "text" else "m.npz")
        assert main(["lower", str(path), "-o", str(lowered)]) == 0
        out = tmp_path / f"out_{form}.npz"
        assert (
            main(
                [
                    "run",
                    str(lowered),
                    "--input",
                    f"x={tmp_path / 'x.npy'}",
                    "--output",
                    str(out),
                ]
            )
            == 0
        )
        assert same_bits(np.load(out)["y"], x)


def test_run_without_output_prints_a_summary(capsys):
    assert main(["run", str(EXAMPLES / "scalars.cpy"), "--fill-inputs", "iota"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ran scalars: 4 DMAs, random mode; final values:\n")
    assert "  weights_out: bfloat16[4, 128]" in out


# -- generated race-free programs -------------------------------------------------

DTYPES = ["f32", "i32", "bf16", "u8", "i16", "f16"]


@st.composite
def race_free_programs(draw):
    """Programs whose every DMA group is fully waited before the next, so
    that they are race-free by construction: pytrees, windows with ragged
    edges, shared semaphores, one wait for several DMAs, `add`."""
    dtype = draw(st.sampled_from(DTYPES))
    rows, cols = draw(st.integers(1, 12)), draw(st.integers(1, 9))
    params = ["x", "y", "z"]
    lines, fresh = [], iter(range(1000))

    def name(prefix):
        return f"{prefix}{next(fresh)}"

    written = {"x", "y"}  # inputs; z is an output that starts unwritten

    for _ in range(draw(st.integers(1, 6))):
        kind = draw(
            st.sampled_from(
                ["split", "tree", "window", "add", "array", "inplace", "rewrite"]
            )
        )
        src = draw(st.sampled_from(sorted(written)))
        if kind == "split":  # two halves started on one semaphore, one whole wait
            buf, s = name("b"), name("s")
            lines += [
                f"{buf} = alloc {dtype}[{rows}, {cols}] @vmem",
                f"{s} = semaphore",
            ]
            cut = draw(st.integers(0, rows))
            for lo, hi in ((0, cut), (cut, rows)):
                if hi > lo:
                    lines.append(
                        f"copy_start {src}[{lo}:{hi}] -> {buf}[{lo}:{hi}], {s}"
                    )
            lines.append(f"copy_wait {src} -> {buf}, {s}")
            lines.append(f"sync_copy {buf} -> z")
            written.add("z")
        elif kind == "tree":
            count = draw(st.integers(0, 3))
            dsts = [name("t") for _ in range(count)]
            lines += [f"{d} = alloc {dtype}[{rows}, {cols}] @smem" for d in dsts]
            srcs = [draw(st.sampled_from(sorted(written))) for _ in dsts]
            tree = draw(st.sampled_from(["tuple", "record"]))
            if tree == "tuple":
                left = "(" + "".join(f"{s}, " for s in srcs) + ")"
                right = "(" + "".join(f"{d}, " for d in dsts) + ")"
            else:
                left = "{" + ", ".join(f"k{i}: {s}" for i, s in enumerate(srcs)) + "}"
                right = "{" + ", ".join(f"k{i}: {d}" for i, d in enumerate(dsts)) + "}"
            lines.append(f"sync_copy {left} -> {right}")
            if dsts:
                lines.append(
                    f"sync_copy {dsts[-1]} -> z, add"
                    if "z" in written
                    else f"sync_copy {dsts[-1]} -> z"
                )
                written.add("z")
        elif kind == "window":
            b0 = draw(
                st.sampled_from(
                    [
                        f"{draw(st.integers(1, rows))}",
                        "None",
                        f"Element({draw(st.integers(1, rows))})",
                    ]
                )
            )
            b1 = draw(
                st.sampled_from(
                    [
                        f"{draw(st.integers(1, cols))}",
                        f"Element({draw(st.integers(1, cols))})",
                    ]
                )
            )
            buffers = draw(st.integers(1, 3))
            bref = name("w")

            def grid(spec, extent):
                if spec == "None" or spec.startswith("Element"):
                    return extent
                return -(-extent // int(spec))

            # Pallas' BufferedRef rounds an Element or cut block's DMA up
            # to the TPU tiling, which these small arrays cannot hold: such
            # windows are `padded` (a kernel grid's); the others either.
            rounds = any(
                spec.startswith("Element")
                or (spec != "None" and extent % int(spec) != 0)
                for spec, extent in ((b0, rows), (b1, cols))
            )
            padded = ", padded" if rounds or draw(st.booleans()) else ""
            lines.append(
                f"{bref} = buffered_ref {src}, block=({b0}, {b1}), "
                f"buffers={buffers}{padded}"
            )

            for _ in range(draw(st.integers(1, 4))):
                i = draw(st.integers(0, grid(b0, rows) - 1))
                j = draw(st.integers(0, grid(b1, cols) - 1))
                slot = draw(st.integers(0, buffers - 1))
                lines.append(f"buffered_copy {src} -> {bref}[{i}, {j}], slot={slot}")
                lines.append(f"buffered_copy {bref}[{i}, {j}] -> z, slot={slot}")
            # Some blocks of z: it is not fully written by this.
        elif kind == "add":
            src = draw(st.sampled_from(["x", "y"]))
            if "z" in written:
                s = name("s")
                lines += [
                    f"{s} = semaphore",
                    f"copy_start {src} -> z, {s}, add",
                    f"copy_wait {src} -> z, {s}",
                ]
        elif kind == "inplace":  # source and destination in one buffer
            buf, s = name("b"), name("s")
            lines += [
                f"{buf} = alloc {dtype}[{2 * rows}, {cols}] @vmem",
                f"{s} = semaphore",
                f"sync_copy {src} -> {buf}[0:{rows}]",
                f"copy_start {buf}[0:{rows}] -> {buf}[{rows}:{2 * rows}], {s}",
                f"copy_wait {buf}[0:{rows}] -> {buf}[{rows}:{2 * rows}], {s}",
                f"sync_copy {buf}[{rows}:{2 * rows}] -> z",
            ]
            written.add("z")
        elif kind == "rewrite":  # a source written again once its DMA is waited
            buf, s, t = name("b"), name("s"), name("s")
            other = draw(st.sampled_from(sorted(written)))
            lines += [
                f"{buf} = alloc {dtype}[{rows}, {cols}] @vmem",
                f"{s} = semaphore",
                f"{t} = semaphore",
                f"sync_copy {src} -> {buf}",
                f"copy_start {buf} -> z, {s}",
                f"copy_wait {buf} -> z, {s}",
                f"copy_start {other} -> {buf}, {t}",
                f"copy_wait {other} -> {buf}, {t}",
                f"sync_copy {buf} -> z, add",
            ]
            written.add("z")
        else:  # a semaphore array, one DMA per row, all in flight, then all waited
            buf, sems = name("b"), name("sa")
            lines += [
                f"{buf} = alloc {dtype}[{rows}, {cols}] @vmem",
                f"{sems} = semaphore[{rows}]",
            ]
            lines += [
                f"copy_start {src}[{r}] -> {buf}[{r}], {sems}[{r}]" for r in range(rows)
            ]
            lines += [
                f"copy_wait {src}[{r}] -> {buf}[{r}], {sems}[{r}]" for r in range(rows)
            ]
            lines.append(f"sync_copy {buf} -> y")
    header = ", ".join(f"{p}: {dtype}[{rows}, {cols}] @hbm" for p in params)
    body = "\n".join(f"  {line}" for line in lines)
    return f"kernel generated({header}) {{\n{body}\n}}\n"


# A generated program may leave an output partly written: poison on both paths.
@pytest.mark.filterwarnings("ignore::copyir.errors.CopyIRWarning")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(race_free_programs(), st.integers(0, 2**16))
def test_generated_programs_agree_with_the_reference(text, seed):
    module = copyir.parse(text, filename="generated.cpy")
    copyir.verify(module)
    stream = copyir.to_stream(copyir.lower(module))
    inputs = {
        k: v
        for k, v in fill_inputs(stream, {}, "random", seed).items()
        if k in ("x", "y")
    }
    check_agreement(module, inputs, seeds=(seed, seed + 1))


@pytest.mark.parametrize("path", VALID_EXAMPLES, ids=lambda p: p.name)
def test_each_example_runs_with_its_inputs(path, tmp_path, capsys):
    inputs_file = path.with_suffix(".inputs.npz")
    assert inputs_file.exists(), "run examples/make_inputs.py"
    with np.load(inputs_file) as data:
        inputs = {k: data[k] for k in data.files}
    module = copyir.parse(path.read_text(), str(path))
    from copyir.backends.interpreter import as_input

    from copyir.dtypes import BY_IR

    kernel = module.ops.first
    types = {n: a.type for n, a in zip(kernel.param_names, kernel.params, strict=True)}
    inputs = {
        k: as_input(v, BY_IR[types[k].element_type].numpy) for k, v in inputs.items()
    }
    expected = run_reference(kernel, inputs)
    for mode in MODES:
        out = tmp_path / f"{mode}.npz"
        args = [
            "run",
            str(path),
            "--input",
            str(inputs_file),
            "--mode",
            mode,
            "--output",
            str(out),
        ]
        assert main(args) == 0
        with np.load(out) as got:
            for name, value in expected.items():
                assert got[name].tobytes() == np.ascontiguousarray(value).tobytes(), (
                    mode,
                    name,
                )


def test_a_computation_that_only_copies_runs_as_a_copy():
    """Every computation `yw[...] = xw[slot]` is planned as a copy step (no
    general computation is left), in every mode."""
    text = (EXAMPLES / "loop_compute.cpy").read_text()
    text = text.replace("yw[...] = 2.0 * xw[slot] + 1.0", "yw[...] = xw[slot]")
    x = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)
    for mode in MODES:
        out = copyir.run(copyir.parse(text, "copy.cpy"), {"x": x}, mode=mode)
        assert np.array_equal(out["y"], x)
