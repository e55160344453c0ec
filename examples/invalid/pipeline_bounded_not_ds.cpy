# A BoundedSlice dimension takes its slice from the index map (Pallas'
# message, verbatim, from `_make_block_slice`): `ds(start, size)`, the
# size at most the bound.

kernel pipeline_bounded_not_ds(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  pipeline grid=(4,)
      # expected-error@+1 {{Must return a ds from the index_map for a BoundedSlice dimension.}}
      in  x block=(BoundedSlice(8), 128) index=(i) -> (8 * i, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}
