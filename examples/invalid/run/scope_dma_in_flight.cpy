# A scope ends while a DMA out of its buffer is still in flight: the
# buffer is gone (the next iteration's scope makes it afresh), so the DMA
# must be waited inside the scope. Reported at the DMA, with a note at the
# scope.

kernel scope_dma_in_flight(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  out = semaphore
  for i in range(8) {
    # expected-note@+1 {{the scope, which ends before the DMA finishes}}
    scope {
      buf = alloc f32[8, 128] @vmem
      sem = semaphore
      copy_start x[ds(8 * i, 8)] -> buf, sem
      copy_wait x[ds(8 * i, 8)] -> buf, sem
      # expected-error@+1 {{This DMA of 4096 bytes on semaphore out is still in flight when the scope of buf ends: wait for it inside the scope, at i = 0}}
      copy_start buf -> y[ds(8 * i, 8)], out
    }
    copy_wait x[0:8] -> y[0:8], out
  }
}
