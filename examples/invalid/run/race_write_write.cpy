# A race: the second DMA writes buf while the first, still in flight, writes
# it too. Whatever order the hardware picks, buf ends up with one of them.

kernel race_write_write(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  t = semaphore
  copy_start x -> buf, s
  # expected-error@+2 {{Race: this DMA writes buf[0:8, 0:128] while the DMA started at examples/invalid/run/race_write_write.cpy:8:3 is in flight and writes it}}
  # expected-note@-2 {{the DMA in flight started here}}
  copy_start y -> buf, t
  copy_wait x -> buf, s
  copy_wait y -> buf, t
}
