# buffered_copy needs a BufferedRef on one side (Pallas' pipeline sync_copy
# says so too): here both sides are plain refs.

kernel neither_buffered(x: f32[128, 128] @hbm) {
  buf = alloc f32[128, 128] @vmem
  # expected-error@+1 {{One of src or dst must be a BufferedRef.}}
  buffered_copy x -> buf, slot=0
}
