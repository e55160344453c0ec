# The action form names a DMA action by string: exactly `start` or `wait`.
# `Start` is not `start` (Pallas' _copy_start_or_wait raises the same).

kernel unknown_action(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{Unknown action: Start}}
  dma Start x -> buf, s
}
