# Two DMAs share a semaphore. A wait proves nothing about one DMA in
# particular until the waits have consumed every byte started on it: after
# the first 16 KiB wait, either half may still be moving, so reading the
# top half is a race even though "its" wait has returned.

kernel race_shared_semaphore(x: f32[64, 128] @hbm, y: f32[32, 128] @hbm) {
  buf = alloc f32[64, 128] @vmem
  s = semaphore
  copy_start x[0:32, :] -> buf[0:32, :], s
  copy_start x[32:64, :] -> buf[32:64, :], s
  copy_wait x[0:32, :] -> buf[0:32, :], s
  # expected-error@+1 {{Race: this DMA reads buf[0:32, 0:128] while the DMA started at examples/invalid/run/race_shared_semaphore.cpy:9:3 is in flight and writes it}}
  sync_copy buf[0:32, :] -> y
  copy_wait x[32:64, :] -> buf[32:64, :], s
}
