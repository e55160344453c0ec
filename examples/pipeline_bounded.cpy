# A BoundedSlice block dimension (`pl.BoundedSlice(8)`): each step's index
# map gives a slice, `ds(start, size)`, here the first 6 rows of each
# 8-row band of x. JAX 0.12's BufferedRef rounds the DMA up to the TPU
# tiling (8 rows of f32), so the whole band lands in the 8-row window; the
# body reads only the slice, and fills the rest of y's block with zeros.

kernel pipeline_bounded(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  pipeline grid=(4,)
      in  x block=(BoundedSlice(8), 128) index=(i) -> (ds(8 * i, 6), 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[0:6, :] = xw[0:6, :] + 1.0
    yw[6:8, :] = 0.0
  }
}
