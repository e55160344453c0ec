# An output takes 1 or 2 buffers (Pallas' message, verbatim): a third
# would only delay a write-back that nothing waits for sooner.

kernel pipeline_output_buffers(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{Buffer count >2 not supported for output buffered refs.}}
  pipeline grid=(8,)
      in  x block=(8, 128) index=(i) -> (i, 0) buffers=3
      out y block=(8, 128) index=(i) -> (i, 0) buffers=3
      (xw, yw) {
    yw[...] = xw
  }
}
