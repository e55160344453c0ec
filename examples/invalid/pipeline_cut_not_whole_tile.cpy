# emit_pipeline's BufferedRef rounds the DMA of a block cut by the array's
# end up to the TPU tiling (JAX's `_create_blocked_slice` with
# `tpu_info.infer_tiling`: 8 rows of f32 here): the last block's 4 rows,
# x[16:20], become x[16:24], past the array, which Pallas' interpret mode
# reports as an out-of-bounds read. Cut by whole tiles (24 rows in blocks
# of 16), or use a kernel grid, whose blocks are padded.

kernel pipeline_cut_not_whole_tile(x: f32[20, 128] @hbm, y: f32[20, 128] @hbm) {
  # expected-error@+1 {{The block of x at 16:20 in dimension 0 ends inside a TPU tile (8 there): Pallas rounds its DMA up to 16:24, past the array's 20 elements (interpret mode's out-of-bounds error), in iteration (2,)}}
  pipeline grid=(3,)
      in  x block=(8, 128) index=(i) -> (i, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw + 1.0
  }
}
