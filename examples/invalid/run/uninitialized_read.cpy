# A read of memory nobody wrote: scratch starts unwritten (and poisoned,
# NaN here, as a visible aid), and only its first four rows were filled.

kernel uninitialized_read(x: f32[4, 128] @hbm, y: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  sync_copy x -> buf[0:4, :]
  # expected-error@+1 {{DMA reads buf[0:8, 0:128], which nobody wrote (first unwritten: buf[4, 0])}}
  sync_copy buf -> y
}
