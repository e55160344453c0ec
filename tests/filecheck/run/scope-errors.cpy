# RUN: copyir run --split-input-file --verify-diagnostics --fill-inputs iota %s
# RUN: copyir verify --protocol --split-input-file --verify-diagnostics %s

# What a scope's end checks, at run time and in the data-free check: no DMA
# still in flight on the scope's semaphores or its buffers (the one on
# buffers is examples/invalid/run/scope_dma_in_flight.cpy), and each entry
# makes its buffers afresh.

# A DMA on a scoped semaphore left in flight: the semaphore owes its bytes.
kernel owes(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  sync_copy x -> buf
  # expected-note@+1 {{the scope, which ends before the DMA finishes}}
  scope {
    sem = semaphore
    # expected-error@+2 {{This DMA of 4096 bytes on semaphore sem is still in flight when the scope of sem ends: wait for it inside the scope}}
    # expected-note@+1 {{semaphore sem ends the scope at 4096 bytes, not zero}}
    copy_start buf -> y, sem
  }
  copy_wait buf -> y, s
}

# -----

# A DMA into a scoped buffer, on the kernel's semaphore, waited too late.
kernel into(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  s = semaphore
  # expected-note@+1 {{the scope, which ends before the DMA finishes}}
  scope {
    buf = alloc f32[8, 128] @vmem
    # expected-error@+1 {{This DMA of 4096 bytes on semaphore s is still in flight when the scope of buf ends: wait for it inside the scope}}
    copy_start x -> buf, s
  }
  copy_wait x -> y, s
}

# -----

# Each entry poisons the buffer afresh: iteration 1 reads what only
# iteration 0 wrote.
kernel stale(x: f32[8, 128] @hbm, y: f32[16, 128] @hbm) {
  for i in range(2) {
    scope {
      buf = alloc f32[8, 128] @vmem
      when i == 0 {
        sync_copy x -> buf
      }
      # expected-error@+1 {{DMA reads buf[0:8, 0:128], which nobody wrote (first unwritten: buf[0, 0]), at i = 1}}
      sync_copy buf -> y[ds(8 * i, 8)]
    }
  }
}
