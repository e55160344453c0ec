# RUN: copyir lower %s | filecheck %s --check-prefix=STREAM
# RUN: copyir run %s --fill-inputs iota | filecheck %s
# RUN: copyir lower %s | copyir run - --fill-inputs iota --mode on_wait | filecheck %s
# RUN: copyir lower %s --format npz -o %t.npz && copyir run %t.npz --fill-inputs iota --mode eager | filecheck %s
# RUN: copyir run %s --fill-inputs iota --trace | filecheck %s --check-prefix=TRACE

# A scope in a loop: a fresh VMEM buffer and semaphore every step. The
# stream keeps the loop, and the scope is an invalidation where it starts
# and a release of each buffer and semaphore where it ends.

# STREAM:      dma.buffer "buf" "vmem" 0 f32 [8, 128]
# STREAM:      dma.semaphore "sem" 0 []
# STREAM-NEXT: dma.loop "i" 4 {
# STREAM-NEXT:   dma.invalidate "vmem" 0 [128, 1] f32 [8, 128]  // {{.*}}scope.cpy:35:5
# STREAM:        dma.wait sem 0 bytes 4096  // {{.*}}scope.cpy:41:7
# STREAM-NEXT:   dma.release "vmem" 0 [128, 1] f32 [8, 128]  // {{.*}}scope.cpy:35:5
# STREAM-NEXT:   dma.release_sem sem 0  // {{.*}}scope.cpy:35:5
# STREAM-NEXT: }

# CHECK:      ran scoped_loop: 8 DMAs, {{.*}} mode; final values:
# CHECK-NEXT:   x: float32[32, 128]
# CHECK-NEXT:   y: float32[32, 128]

# TRACE:      i = 0: invalidate buf[0:8, 0:128]
# TRACE-NEXT: i = 0: start x[0:8, 0:128] -> buf[0:8, 0:128] on sem
# TRACE-NEXT: i = 0: wait sem 4096
# TRACE-NEXT: i = 0: start buf[0:8, 0:128] -> y[0:8, 0:128] on sem
# TRACE-NEXT: i = 0: wait sem 4096
# TRACE-NEXT: i = 0: release buf[0:8, 0:128]
# TRACE-NEXT: i = 0: release sem
# TRACE-NEXT: i = 1: invalidate buf[0:8, 0:128]

kernel scoped_loop(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  for i in range(4) {
    scope {
      buf = alloc f32[8, 128] @vmem
      sem = semaphore
      copy_start x[ds(8 * i, 8)] -> buf, sem
      copy_wait x[ds(8 * i, 8)] -> buf, sem
      copy_start buf -> y[ds(8 * i, 8)], sem
      copy_wait buf -> y[ds(8 * i, 8)], sem
    }
  }
}
