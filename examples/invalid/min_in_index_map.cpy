# min and max clamp a view's start, an index or a named value; a pipeline's
# index map (Pallas' BlockSpec index_map) takes affine expressions only, so
# far: a clamped block of a pipeline is not supported yet.

kernel min_in_index_map(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  pipeline grid=(8,)
      # expected-error@+1 {{The index map of x uses min(i, 6): min in a pipeline's index map is not supported yet}}
      in  x block=(8, 128) index=(i) -> (min(i, 6), 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}
