# RUN: copyir run %s --fill-inputs iota --mode eager --trace | filecheck %s

# `pl.Buffered(3, use_lookahead=True)` on an input whose block stays put
# over j (JAX 0.12's pipeline.py, `fetch_with_lookahead`, line 1097): the
# prologue fetches blocks 0 and 1 (the walk finds block 1 two steps on),
# and each step where a block starts fetches the block 2 blocks ahead, 4
# steps, as long as one is left: block 2 at i = 0, block 3 at i = 1. Without
# lookahead the fetches would go 2 steps ahead. tests/pallas/
# test_pipelines_side_by_side.py runs this kernel side by side with 0.12's
# interpret mode, event for event.

# CHECK:      start x[0:8, 0:256] -> x_window[0:1, 0:8, 0:256] on x_sems[0]
# CHECK-NEXT: start x[8:16, 0:256] -> x_window[1:2, 0:8, 0:256] on x_sems[1]
# CHECK-NEXT: i = 0, j = 0: start x[16:24, 0:256] -> x_window[2:3, 0:8, 0:256] on x_sems[2]
# CHECK-NEXT: i = 0, j = 0: wait x_sems[0] 8192
# CHECK-NEXT: i = 0, j = 0: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 0, j = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 0, j = 0: start y_window[0:1, 0:8, 0:128] -> y[0:8, 0:128] on y_sems[0]
# CHECK-NEXT: i = 0, j = 1: invalidate y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 0, j = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 0, j = 1: start y_window[1:2, 0:8, 0:128] -> y[0:8, 128:256] on y_sems[1]
# CHECK-NEXT: i = 0, j = 1: wait y_sems[0] 4096
# CHECK-NEXT: i = 1, j = 0: start x[24:32, 0:256] -> x_window[0:1, 0:8, 0:256] on x_sems[0]
# CHECK-NEXT: i = 1, j = 0: wait x_sems[1] 8192
# CHECK-NEXT: i = 1, j = 0: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 1, j = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 1, j = 0: start y_window[0:1, 0:8, 0:128] -> y[8:16, 0:128] on y_sems[0]
# CHECK-NEXT: i = 1, j = 0: wait y_sems[1] 4096
# CHECK-NEXT: i = 1, j = 1: invalidate y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 1, j = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 1, j = 1: start y_window[1:2, 0:8, 0:128] -> y[8:16, 128:256] on y_sems[1]
# CHECK-NEXT: i = 1, j = 1: wait y_sems[0] 4096
# CHECK-NEXT: i = 2, j = 0: wait x_sems[2] 8192
# CHECK-NEXT: i = 2, j = 0: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 2, j = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 2, j = 0: start y_window[0:1, 0:8, 0:128] -> y[16:24, 0:128] on y_sems[0]
# CHECK-NEXT: i = 2, j = 0: wait y_sems[1] 4096
# CHECK-NEXT: i = 2, j = 1: invalidate y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 2, j = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 2, j = 1: start y_window[1:2, 0:8, 0:128] -> y[16:24, 128:256] on y_sems[1]
# CHECK-NEXT: i = 2, j = 1: wait y_sems[0] 4096
# CHECK-NEXT: i = 3, j = 0: wait x_sems[0] 8192
# CHECK-NEXT: i = 3, j = 0: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 3, j = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 3, j = 0: start y_window[0:1, 0:8, 0:128] -> y[24:32, 0:128] on y_sems[0]
# CHECK-NEXT: i = 3, j = 0: wait y_sems[1] 4096
# CHECK-NEXT: i = 3, j = 1: invalidate y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 3, j = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 3, j = 1: start y_window[1:2, 0:8, 0:128] -> y[24:32, 128:256] on y_sems[1]
# CHECK-NEXT: i = 3, j = 1: wait y_sems[0] 4096
# CHECK-NEXT: wait y_sems[1] 4096
# CHECK-NEXT: ran rows: 12 DMAs, eager mode; final values:

kernel rows(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4, 2)
      in  x block=(8, 256) index=(i, j) -> (i, 0) buffers=3 lookahead
      out y block=(8, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = xw[:, 0:128] * 2.0
  }
}
