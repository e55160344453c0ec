# RUN: copyir run %s --fill-inputs iota --mode eager --trace | filecheck %s

# An input-output operand with buffers (2, 1): its write-back is
# synchronous (JAX 0.12's `BufferedRef.copy_out` waits it at once when
# `out_buffer_count == 1`), but it still starts and waits on
# `sem_sends[slot]`, one semaphore per slot of its in + out - 1 = 2 slots
# (`create`: `SemaphoreType.DMA((total_buffer_count,))`), so successive
# write-backs alternate between y_out_sems[0] and y_out_sems[1]. Checked
# event for event against 0.12's interpret mode (a kernel passing
# `BufferedRef.input_output(spec, f32, (2, 1))` through `allocations`).

# CHECK:      i = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 0: start y_window[0:1, 0:8, 0:128] -> y[0:8, 0:128] on y_out_sems[0]
# CHECK-NEXT: i = 0: wait y_out_sems[0] 4096
# CHECK:      i = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 1: start y_window[1:2, 0:8, 0:128] -> y[8:16, 0:128] on y_out_sems[1]
# CHECK-NEXT: i = 1: wait y_out_sems[1] 4096
# CHECK:      i = 3: start y_window[1:2, 0:8, 0:128] -> y[24:32, 0:128] on y_out_sems[1]
# CHECK-NEXT: i = 3: wait y_out_sems[1] 4096

kernel pipeline_inout_sync(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  pipeline grid=(4,)
      in    x block=(8, 128) index=(i) -> (i, 0)
      inout y block=(8, 128) index=(i) -> (i, 0) buffers=(2, 1)
      (xw, yw) {
    yw += xw
  }
}
