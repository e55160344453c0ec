# Manual DMAs: two starts share one semaphore, and one larger descriptor
# waits for both at once.
#
# A semaphore counts bytes. The two halves each add 16 KiB when they land;
# the wait names the whole 32 KiB buffer, so it returns once both halves
# have arrived and lowers the semaphore back to zero.

kernel manual(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[64, 128] @vmem
  s = semaphore
  copy_start x[0:32, :] -> buf[0:32, :], s
  copy_start x[32:64, :] -> buf[32:64, :], s
  copy_wait x -> buf, s          # one 32 KiB wait covers both halves
  dma start buf -> y, s          # the action form: `start` or `wait` only
  dma wait buf -> y, s
}
