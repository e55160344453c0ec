# A wait no DMA can ever satisfy: it names the whole 32 KiB buffer, but only
# one 16 KiB half was started on s. On hardware this hangs; copyir says so.

kernel unsatisfiable_wait(x: f32[64, 128] @hbm) {
  buf = alloc f32[64, 128] @vmem
  s = semaphore
  copy_start x[0:32, :] -> buf[0:32, :], s
  # expected-error@+1 {{Wait on semaphore s needs 32768 bytes, but at most 16384 bytes can still arrive}}
  copy_wait x -> buf, s
}
