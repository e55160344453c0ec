# A BufferedRef whose DMAs Pallas rounds to the TPU tiling (an Element or
# BoundedSlice dimension, or a blocked one cut by the array's end) needs
# blocks of whole tiles there: 128 lanes in the last dimension. Pallas'
# message, verbatim, from `_create_bounded_slice`.

kernel block_tiling(x: f32[8, 512] @hbm, y: f32[8, 512] @hbm) {
  # expected-error@+1 {{Block size must divide tiling: block_size=96, tiling=128}}
  cols = buffered_ref x, block=(8, Element(96)), buffers=1
  buffered_copy x -> cols[0, 0]
  buffered_copy cols[0, 0] -> y
}
