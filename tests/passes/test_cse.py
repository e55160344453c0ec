"""The `cse` pass: the parser makes an op of every view written, and `cse`
merges the equal ones (xDSL's common-subexpression elimination) on request;
the default lowering folds each into an address without it."""

from __future__ import annotations

from copyir.passes import LOWERING, PASSES

import copyir
from copyir.api import apply_passes, pipeline
from copyir.dialects.copy import DmaOp, IndexOp, SemIndexOp, ViewOp

RING = """kernel ring(x: f32[4, 8, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  s = semaphore[2]
  copy_start x[0] -> buf[0], s[0]
  copy_wait x[0] -> buf[0], s[0]
  copy_start x[1] -> buf[1], s[1]
  copy_wait x[1] -> buf[1], s[1]
  copy_start x[2] -> buf[0], s[0]
  copy_wait x[2] -> buf[0], s[0]
}
"""

LOOP = """kernel loop(x: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  s = semaphore[2]
  copy_start x[0:8] -> buf[0], s[0]
  for i in range(8) {
    copy_start x[ds(8 * i, 8)] -> buf[i % 2], s[i % 2]
    copy_wait x[ds(8 * i, 8)] -> buf[i % 2], s[i % 2]
    when i < 7 {
      copy_wait x[ds(8 * i, 8)] -> buf[i % 2], s[i % 2]
    }
  }
  copy_wait x[0:8] -> buf[0], s[0]
}
"""


def ops_of(module, op_type) -> list:
    return [op for op in module.walk() if isinstance(op, op_type)]


def test_a_view_written_twice_is_two_ops_until_cse():
    module = copyir.parse(RING, "ring.cpy")
    assert len(ops_of(module, ViewOp)) == 12  # x[k] and buf[k] per DMA
    assert len(ops_of(module, SemIndexOp)) == 6
    copyir.verify(module)
    apply_passes(module, pipeline("cse"))
    # x[0], x[1], x[2], buf[0], buf[1]; s[0], s[1].
    assert len(ops_of(module, ViewOp)) == 5
    assert len(ops_of(module, SemIndexOp)) == 2
    dmas = ops_of(module, DmaOp)
    for start, wait in zip(dmas[::2], dmas[1::2], strict=True):
        assert list(start.operands) == list(wait.operands)
    assert dmas[0].dst is dmas[4].dst  # buf[0], written in two pairs


def test_cse_merges_into_an_equal_op_outside_a_body():
    module = copyir.parse(LOOP, "loop.cpy")
    copyir.verify(module)
    apply_passes(module, pipeline("cse"))
    # Outside: x[0:8], buf[0], s[0]; in the loop: 8 * i and i % 2, x[...],
    # buf[...], s[...]; the when's DMA takes the loop's.
    assert len(ops_of(module, IndexOp)) == 2
    assert len(ops_of(module, ViewOp)) == 4
    assert len(ops_of(module, SemIndexOp)) == 2
    first, start, wait, inner, last = ops_of(module, DmaOp)
    assert list(first.operands) == list(last.operands)
    assert list(start.operands) == list(wait.operands) == list(inner.operands)


def test_the_lowering_leaves_cse_out():
    """It costs more than it saves: the stream is the same without it."""
    assert "cse" not in LOWERING
    assert "cse" in PASSES


def test_cse_leaves_the_stream_as_it_was():
    """A view is an address and strides whichever op holds it."""
    at = LOWERING.index("convert-copy-to-dma")
    with_cse = [*LOWERING[:at], "cse", *LOWERING[at:]]
    for text in (RING, LOOP):
        streams = []
        for names in (with_cse, LOWERING):
            module = copyir.parse(text, "p.cpy")
            copyir.verify(module)
            apply_passes(module, pipeline(",".join(names)))
            streams.append(copyir.api.dma_text(module.ops.first))
        assert streams[0] == streams[1]


def test_a_program_printed_after_cse_parses_back_to_as_many_ops():
    """Merged views have several users: each prints as a statement of its
    own, named, and its index values inline in it."""
    module = copyir.parse(LOOP, "loop.cpy")
    apply_passes(module, pipeline("cse"))
    text = copyir.to_text(module, "cpy")
    assert "    copy_wait v4 -> v6, v7\n" in text, text
    assert "    v4 = x[ds(8 * i, 8)]\n" in text, text
    again = copyir.parse(text, "printed.cpy")
    assert len(list(again.walk())) == len(list(module.walk())), text
    assert copyir.to_text(again, "cpy") == text
