# buffered_copy copies between a plain ref and a window: two BufferedRefs
# is one too many.

kernel both_buffered(x: f32[256, 128] @hbm) {
  bx = buffered_ref x, block=(128, 128), buffers=2
  by = buffered_ref x, block=(128, 128), buffers=2
  # expected-error@+1 {{Only one of src or dst can be a BufferedRef.}}
  buffered_copy bx[0, 0] -> by, slot=0
}
