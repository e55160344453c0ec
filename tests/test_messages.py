"""The documented messages, compared exactly (`str(err) == MESSAGE`).

The verbatim ones come from Pallas and Mosaic and name nothing; the others
are formatted from the constants in `copyir.errors` with the values they
must name.
"""

from __future__ import annotations

import pytest
from conftest import EXAMPLES
from xdsl.dialects.builtin import Float32Type

import copyir
from copyir import errors
from copyir.cli import main
from copyir.dialects.copy import (
    AllocOp,
    BufferedCopyOp,
    DmaOp,
    KernelOp,
    RefType,
    SemaphoreOp,
)
from copyir.errors import CopyIRError

F32 = Float32Type()


def error_of(text: str, filename: str = "t.cpy") -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, filename=filename))
    return caught.value


def kernel(body: str, params: str = "x: f32[8, 128] @hbm, y: f32[8, 128] @hbm") -> str:
    lines = "\n".join(f"  {line}" for line in body.strip().splitlines())
    return f"kernel k({params}) {{\n{lines}\n}}\n"


def test_verbatim_messages():
    assert errors.NEITHER_BUFFERED == "One of src or dst must be a BufferedRef."
    assert errors.BOTH_BUFFERED == "Only one of src or dst can be a BufferedRef."
    assert errors.SHAPE_MISMATCH == "DMA source and target shape mismatch."
    assert errors.DTYPE_MISMATCH == "DMA source and target element type mismatch"
    assert errors.UNKNOWN_ACTION.format(action="x") == "Unknown action: x"


@pytest.mark.parametrize("action", ["Start", "commit", "", "WAIT", "start ", "wait\\n"])
def test_unknown_action_in_the_authoring_syntax(action):
    text = kernel(
        f'buf = alloc f32[8, 128] @vmem\ns = semaphore\ndma "{action}" x -> buf, s'
    )
    assert str(error_of(text)) == f"Unknown action: {action.replace(chr(92), '')}"


@pytest.mark.parametrize("action", ["Start", "commit"])
def test_unknown_action_as_a_bare_identifier(action):
    text = kernel(
        f"buf = alloc f32[8, 128] @vmem\ns = semaphore\ndma {action} x -> buf, s"
    )
    err = error_of(text)
    assert str(err) == f"Unknown action: {action}"
    assert (err.loc.line, err.loc.col) == (4, 3)


@pytest.mark.parametrize("action", ["Start", "commit", ""])
def test_unknown_action_in_the_generic_mlir_form(action):
    text = f"""
copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {{
  %b = copy.alloc : !copy.ref<8xf32, vmem>
  %s = copy.semaphore : !copy.sem
  "copy.dma"(%x, %b, %s) <{{action = "{action}"}}> : (!copy.ref<8xf32, hbm>, !copy.ref<8xf32, vmem>, !copy.sem) -> ()
}}
"""
    err = error_of(text, "t.mlir")
    assert str(err) == f"Unknown action: {action}"
    assert err.loc.line == 5


@pytest.mark.parametrize("action", ["Start", "commit", ""])
def test_unknown_action_in_the_python_builder(action):
    k = KernelOp("k", [("x", RefType([8], F32, "hbm"))])
    buf = AllocOp(RefType([8], F32, "vmem"), "buf")
    sem = SemaphoreOp(name="s")
    with pytest.raises(ValueError) as caught:
        DmaOp(action, k.params[0], buf.result, sem.result)
    assert str(caught.value) == f"Unknown action: {action}"


def test_valid_actions_build():
    k = KernelOp("k", [("x", RefType([8], F32, "hbm"))])
    buf = AllocOp(RefType([8], F32, "vmem"), "buf")
    sem = SemaphoreOp(name="s")
    ops = [buf, sem]
    for action in ("start", "wait"):
        ops.append(DmaOp(action, k.params[0], buf.result, sem.result))
    k.body.block.add_ops(ops)
    from xdsl.dialects.builtin import ModuleOp

    copyir.verify(ModuleOp([k]))


def test_a_verify_error_prints_its_location_line_and_caret(capsys):
    path = EXAMPLES / "invalid" / "neither_buffered.cpy"
    assert (
        main(["verify", "examples/invalid/neither_buffered.cpy"]) == 1
        or main(["verify", str(path)]) == 1
    )
    err = capsys.readouterr().err.splitlines()
    assert err[0].endswith(
        "neither_buffered.cpy:7:3: error: One of src or dst must be a BufferedRef."
    )
    assert err[1] == "  buffered_copy x -> buf, slot=0"
    assert err[2] == "  ^"


def test_both_buffered_checked_before_indices():
    text = kernel(
        "bx = buffered_ref x, block=(8, 128), buffers=1\n"
        "by = buffered_ref x, block=(8, 128), buffers=1\n"
        "buffered_copy bx[0, 0] -> by[0, 0]"
    )
    assert str(error_of(text)) == errors.BOTH_BUFFERED


def test_neither_buffered_with_indices_on_both_sides():
    text = kernel("buffered_copy x[0, 0] -> y[0, 0]")
    assert str(error_of(text)) == errors.NEITHER_BUFFERED


def test_dtype_is_reported_when_shape_and_dtype_both_differ():
    text = kernel("b = alloc i32[4] @vmem\ns = semaphore\ncopy_start x -> b, s")
    assert str(error_of(text)) == errors.DTYPE_MISMATCH


def test_sync_copy_leaf_mismatch_notes_the_leaf():
    text = kernel(
        "a = alloc f32[8, 128] @vmem\nb = alloc f32[4, 128] @vmem\n"
        "sync_copy {p: x, q: y} -> {p: a, q: b}"
    )
    err = error_of(text)
    assert str(err) == errors.SHAPE_MISMATCH
    assert err.notes[0].message == (
        "at leaf ['q']: y is f32[8, 128] @hbm, b is f32[4, 128] @vmem"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "b = alloc f32[8, 128] @vmem\nsync_copy (x, y) -> (b,)",
            errors.TREE_MISMATCH.format(src="(x, y)", dst="(b,)"),
        ),
        (
            "b = alloc f32[8, 128] @vmem\nsync_copy (x,) -> [b]",
            errors.TREE_MISMATCH.format(src="(x,)", dst="[b]"),
        ),
        (
            "s = semaphore\nsync_copy x -> s",
            errors.EXPECTED_REF.format(
                op="sync_copy", role="destination leaf", name="s", type="a semaphore"
            ),
        ),
        (
            "s = semaphore\ncopy_start x -> y, x",
            errors.EXPECTED_SEMAPHORE.format(
                op="copy_start", role="sem", name="x", type="f32[8, 128] @hbm"
            ),
        ),
        (
            "s = semaphore\ncopy_start x[0, 0, 0] -> y, s",
            errors.TOO_MANY_INDICES.format(name="x", rank=2, count=3),
        ),
        (
            "s = semaphore[2]\ncopy_start x -> y[0:4], s[2]",
            errors.INDEX_OUT_OF_BOUNDS.format(index=2, dim=0, name="s", size=2),
        ),
        (
            "s = semaphore\ncopy_start x[0:4, :] -> x[2:6, :], s",
            errors.DMA_OVERLAP.format(src="x[0:4, 0:128]", dst="x[2:6, 0:128]"),
        ),
        (
            "s = semaphore\ncopy_start x -> y, s, priority=-1",
            errors.BAD_PRIORITY.format(priority=-1),
        ),
        (
            "bx = buffered_ref x, block=(8, 128), buffers=-3",
            errors.BAD_BUFFERS.format(buffers=-3),
        ),
        (
            "bx = buffered_ref x, block=(0, 128)",
            errors.BLOCK_SIZE.format(size=0, dim=0, extent=8),
        ),
        (
            "bx = buffered_ref x, block=(4, 128, 1)",
            errors.BLOCK_RANK.format(block="(4, 128, 1)", block_rank=3, rank=2),
        ),
        (
            "bx = buffered_ref x, block=(3, 128), padded\nbuffered_copy x -> bx[3, 0]",
            errors.BLOCK_INDEX_OUT_OF_BOUNDS.format(
                index=3, dim=0, bref="bx", extent=3
            ),
        ),
        (
            "bx = buffered_ref x, block=(Element(4), 128), padded\n"
            "buffered_copy x -> bx[8, 0]",
            errors.ELEMENT_INDEX_OUT_OF_BOUNDS.format(
                index=8, dim=0, bref="bx", extent=8
            ),
        ),
        (
            "bx = buffered_ref x, block=(None, 128)\nbuffered_copy x -> bx[-1, 0]",
            errors.NEGATIVE_INDEX.format(index=-1, expr="bx[-1, 0]"),
        ),
        (
            "v = x[0:4]\nv = y[0:4]",
            errors.DEFINED_TWICE.format(name="v", line=2),
        ),
        (
            "b = alloc f32[1, 1] @smem\nc = alloc f32[1024, 512] @smem",
            errors.OVER_CAPACITY.format(
                name="c", size=2 << 20, space="smem", capacity=1 << 20, target="default"
            ),
        ),
    ],
)
def test_message_names_the_values(body, message):
    assert str(error_of(kernel(body))) == message


@pytest.mark.parametrize(
    ("params", "body", "message"),
    [
        (  # jax 0.12 pipeline.py, _create_blocked_slice: 8 % 3 cuts a block
            "x: f32[8, 128] @hbm",
            "bx = buffered_ref x, block=(3, 128)",
            "Block size must divide tiling: block_size=3, tiling=8",
        ),
        (  # _create_bounded_slice checks an Element block always
            "x: f32[64, 256] @hbm",
            "bx = buffered_ref x, block=(8, Element(64))",
            "Block size must divide tiling: block_size=64, tiling=128",
        ),
        (  # a 1-D bf16 array's tile: 128 lanes of two elements
            "x: bf16[1024] @hbm",
            "bx = buffered_ref x, block=(Element(128),)",
            "Block size must divide tiling: block_size=128, tiling=256",
        ),
        (  # 4 rows of f32 tile by 4 (the tile stays below the extent)
            "x: f32[4, 128] @hbm",
            "bx = buffered_ref x, block=(Element(2), 128)",
            "Block size must divide tiling: block_size=2, tiling=4",
        ),
        (
            "x: f32[20, 128] @hbm",
            "bx = buffered_ref x, block=(8, 128)\nbuffered_copy x -> bx[2, 0]",
            errors.CUT_BLOCK_PAST_END.format(
                bref="bx", dim=0, start=16, end=20, tile=8, stop=24, extent=20
            ),
        ),
        (  # 1-D: Pallas' tile is 0 (`block_size % 0` fails)
            "x: f64[256] @hbm",
            "bx = buffered_ref x, block=(Element(128),)",
            errors.NO_TILING.format(itemsize=8),
        ),
        (  # 2-D: `_get_tiling_factor` doubles 0 forever, cut or not
            "x: f64[16, 128] @hbm",
            "bx = buffered_ref x, block=(Element(8), 128)",
            errors.NO_TILING_HANGS.format(itemsize=8),
        ),
        (
            "x: i64[16, 128] @hbm",
            "bx = buffered_ref x, block=(8, 128)",
            errors.NO_TILING_HANGS.format(itemsize=8),
        ),
    ],
)
def test_pallas_tiling_of_buffered_ref_copies(params, body, message):
    """Pallas' BufferedRef rounds a DMA to the array's TPU tiling
    (`tpu_info.infer_tiling`) where a block is cut or is an Element one."""
    assert str(error_of(kernel(body, params))) == message


NESTED_CUT = """\
kernel k(x: f32[24, 128] @hbm, y: f32[24, 128] @hbm) {
  pipeline grid=(1,)
      in  x block=(24, 128) index=(i) -> (0, 0)
      out y block=(24, 128) index=(i) -> (0, 0)
      (xw, yw) {
    pipeline grid=(2,)
        in  xw block=(16, 128) index=(j) -> (j, 0)
        out yw block=(16, 128) index=(j) -> (j, 0)
        (a, b) {
      b[...] = a + 1.0
    }
  }
}
"""


def test_a_cut_block_of_an_operand_in_vmem_is_viewed_whole():
    """Pallas views a pipeline's operand in VMEM a whole block at a time
    (`BufferedRef.compute_slice`): a cut block reads past the window, an
    out-of-bounds error in interpret mode (it was a traceback on the
    reference path and a stray DMA error in a run)."""
    message = errors.VIEWED_BLOCK_PAST_END.format(
        bref="xw", start=16, stop=32, dim=0, extent=24, space="vmem"
    )
    assert str(error_of(NESTED_CUT)) == f"{message}, in iteration (1,)"


def test_a_rounded_cut_is_named_at_its_first_iteration():
    """Lanes 128:192 are cut at iteration (0, 1), before rows 16:20 at
    (1, 0): Pallas' interpret mode fails at the first."""
    text = """\
kernel k(x: f32[20, 192] @hbm, y: f32[20, 192] @hbm) {
  pipeline grid=(2, 2)
      in  x block=(16, 128) index=(i, j) -> (i, j)
      out y block=(16, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = xw
  }
}
"""
    message = errors.CUT_BLOCK_PAST_END.format(
        bref="x", dim=1, start=128, end=192, tile=128, stop=256, extent=192
    )
    assert str(error_of(text)) == f"{message}, in iteration (0, 1)"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            "x: f32[8] @smem",
            errors.PARAM_NOT_HBM.format(name="x", type="f32[8] @smem"),
        ),
        (
            "x: f33[8]",
            errors.UNKNOWN_DTYPE.format(dtype="f33", known=copyir.dtypes.KNOWN_NAMES),
        ),
        ("x: f32[8] @gpu", errors.UNKNOWN_SPACE.format(space="gpu")),
        ("x: f32[-8]", errors.BAD_DIMENSION.format(type="f32[-8] @hbm")),
        ("x: f32[8], x: f32[8]", errors.DEFINED_TWICE.format(name="x", line=1)),
        (
            "x: f32[99999999999999999999]",
            errors.INT_RANGE.format(value="99999999999999999999"),
        ),
        (
            "x: f32[1048576, 1048576]",
            errors.OVER_CAPACITY.format(
                name="x", size=4 << 40, space="hbm", capacity=16 << 30, target="default"
            ),
        ),
    ],
)
def test_parameter_errors(params, message):
    assert str(error_of(f"kernel k({params}) {{\n}}\n")) == message


def test_any_is_an_alias_of_hbm():
    module = copyir.parse("kernel k(x: f32[8] @any) {\n}\n")
    copyir.verify(module)
    assert copyir.to_text(module).startswith("kernel k(x: f32[8] @hbm)")


def test_buffered_copy_builder_puts_indices_on_the_bref_side():
    text = kernel("bx = buffered_ref x, block=(4, 128), buffers=2")
    module = copyir.parse(text)
    k = module.ops.first
    bref = next(iter(k.body.block.ops)).result
    op = BufferedCopyOp(k.params[0], bref, [1, 0], slot=1)
    k.body.block.add_op(op)
    copyir.verify(module)
    assert op.block_indices == (1, 0)
    assert op.copy_in


def test_syntax_errors_are_located_project_errors():
    err = error_of("kernel k(x: f32[8]) {\n  copy_start x ->\n}\n")
    assert isinstance(err, ValueError)
    assert (err.loc.line, err.loc.col) == (2, 18)
    assert str(err).startswith("unexpected end of line; expected")


def test_mlir_syntax_errors_are_located_project_errors():
    err = error_of("copy.kernel @k() {\n  %x = copy.bogus\n}\n", "t.mlir")
    assert err.loc.file == "t.mlir"
    assert str(err) == "Operation copy.bogus is not registered"
