# A race: a DMA overwrites the source of a DMA still in flight, which may
# not have read it yet.

kernel race_source_overwritten(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  t = semaphore
  sync_copy x -> buf
  copy_start buf -> y, s
  # expected-error@+1 {{Race: this DMA writes buf[0:8, 0:128] while the DMA started at examples/invalid/run/race_source_overwritten.cpy:9:3 is in flight and reads it}}
  copy_start x -> buf, t
  copy_wait buf -> y, s
  copy_wait x -> buf, t
}
