# RUN: copyir verify --split-input-file --verify-diagnostics %s

# Pallas' BufferedRef rounds a copy to the TPU tiling (jax 0.12
# pipeline.py, `_make_block_slice`; `tpu_info.infer_tiling`): each part
# states the exact message and the line it points at.

# A cut block in a loop: the rounded DMA of block 2 (rows 16:24 of 20) is
# past the end, named at the first iteration that copies it.
kernel k(x: f32[20, 128] @hbm, y: f32[20, 128] @hbm) {
  bx = buffered_ref x, block=(8, 128), buffers=1
  for i in range(3) {
    # expected-error@+1 {{The block of bx at 16:20 in dimension 0 ends inside a TPU tile (8 there): Pallas rounds its DMA up to 16:24, past the array's 20 elements (interpret mode's out-of-bounds error), at i = 2}}
    buffered_copy x -> bx[i, 0], slot=0
  }
}

# -----

# The same BufferedRef padded (a kernel grid's blocks) copies 4 rows.
kernel k(x: f32[20, 128] @hbm, y: f32[20, 128] @hbm) {
  bx = buffered_ref x, block=(8, 128), buffers=1, padded
  for i in range(3) {
    buffered_copy x -> bx[i, 0], slot=0
    buffered_copy bx[i, 0] -> y, slot=0
  }
}

# -----

# 8-byte elements have no tile: a cut 1-D block cannot be rounded.
kernel k(x: f64[384] @hbm) {
  # expected-error@+1 {{Pallas has no TPU tiling for 8-byte elements, and a BufferedRef rounds its DMAs to the tiling (a cut block, Element or BoundedSlice): use elements of at most 4 bytes}}
  bx = buffered_ref x, block=(256,), buffers=1
}

# -----

# ... and in 2 or more dimensions Pallas' tiling never ends, cut or not.
kernel k(x: i64[16, 128] @hbm) {
  # expected-error@+1 {{Pallas' BufferedRef infers the TPU tiling of an array of 2 or more dimensions for every block it copies, and for 8-byte elements its loop never ends (the kernel hangs): use elements of at most 4 bytes, or a block of the whole array}}
  bx = buffered_ref x, block=(8, 128), buffers=1
}

# -----

# A pipeline views an operand already in VMEM a whole block at a time: a
# cut block there reaches past the window.
kernel k(x: f32[24, 128] @hbm, y: f32[24, 128] @hbm) {
  pipeline grid=(1,)
      in  x block=(24, 128) index=(i) -> (0, 0)
      out y block=(24, 128) index=(i) -> (0, 0)
      (xw, yw) {
    # expected-error@+1 {{The block of xw at 16:32 in dimension 0 reaches past the array's 24 elements: a pipeline views an operand in vmem (no copy) a whole block at a time, as Pallas does (interpret mode's out-of-bounds error), in iteration (1,)}}
    pipeline grid=(2,)
        in  xw block=(16, 128) index=(k) -> (k, 0)
        out yw block=(16, 128) index=(k) -> (k, 0)
        (a, b) {
      b[...] = a
    }
  }
}
