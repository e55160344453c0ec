# A pipeline nested in another: the outer one streams (16, 256) blocks of
# x and y through VMEM windows, and the inner one walks each window in
# (16, 128) blocks, as jax's `test_transformed_refs_as_inputs_nested`
# does. The inner pipeline's operands are in VMEM already, so, as in
# Pallas (`BufferedRef.create` allocates no buffer when the source's
# memory space is the window's), its windows are views of the outer
# windows at each block: the inner pipeline copies nothing, and y = x + 1
# is written straight into the outer output window.

kernel pipeline_nested(x: f32[16, 512] @hbm, y: f32[16, 512] @hbm) {
  pipeline grid=(2,)
      in  x block=(16, 256) index=(i) -> (0, i)
      out y block=(16, 256) index=(i) -> (0, i)
      (xw, yw) {
    pipeline grid=(2,)
        in  xw block=(16, 128) index=(k) -> (0, k)
        out yw block=(16, 128) index=(k) -> (0, k)
        (inner_x, inner_y, k) {
      inner_y[...] = inner_x + 1.0
    }
  }
}
