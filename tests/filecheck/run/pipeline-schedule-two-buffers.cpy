# RUN: copyir run %s --fill-inputs iota --mode eager --trace | filecheck %s

# Pallas' schedule (jax/_src/pallas/mosaic/pipeline.py) for grid=(4,), one
# input and one output with 2 buffers each, written in the authoring
# syntax; the same events as pipeline-schedule-two-buffers.mlir, which Pallas'
# interpret mode ran (jax 0.10.2): the prologue fetches block 0; each step
# fetches the next step's block, waits its own, runs the body, starts its
# write-back and waits the previous step's; the epilogue waits the last
# write-back. Every wait is 4096 bytes, one (8, 128) f32 block. The body
# names no grid index, so the trace calls it i.

# CHECK:      start x[0:8, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
# CHECK-NEXT: i = 0: start x[8:16, 0:128] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
# CHECK-NEXT: i = 0: wait x_sems[0] 4096
# CHECK-NEXT: i = 0: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 0: start y_window[0:1, 0:8, 0:128] -> y[0:8, 0:128] on y_sems[0]
# CHECK-NEXT: i = 1: start x[16:24, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
# CHECK-NEXT: i = 1: wait x_sems[1] 4096
# CHECK-NEXT: i = 1: invalidate y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 1: start y_window[1:2, 0:8, 0:128] -> y[8:16, 0:128] on y_sems[1]
# CHECK-NEXT: i = 1: wait y_sems[0] 4096
# CHECK-NEXT: i = 2: start x[24:32, 0:128] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
# CHECK-NEXT: i = 2: wait x_sems[0] 4096
# CHECK-NEXT: i = 2: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 2: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 2: start y_window[0:1, 0:8, 0:128] -> y[16:24, 0:128] on y_sems[0]
# CHECK-NEXT: i = 2: wait y_sems[1] 4096
# CHECK-NEXT: i = 3: wait x_sems[1] 4096
# CHECK-NEXT: i = 3: invalidate y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 3: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 3: start y_window[1:2, 0:8, 0:128] -> y[24:32, 0:128] on y_sems[1]
# CHECK-NEXT: i = 3: wait y_sems[0] 4096
# CHECK-NEXT: wait y_sems[1] 4096
# CHECK-NEXT: ran scale: 8 DMAs, eager mode; final values:

kernel scale(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  pipeline grid=(4,)
      in  x block=(8, 128) index=(i) -> (i, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = 2.0 * xw + 1.0
  }
}
