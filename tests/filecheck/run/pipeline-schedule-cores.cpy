# RUN: copyir run %s --fill-inputs iota --mode eager --trace | filecheck %s

# emit_pipeline over 2 cores (JAX 0.12's `_partition_grid`, line 1687):
# no parallel dimension's extent (3) is divisible by 2, so the largest one
# is split unevenly (line 1778: `base_num_iters, rem = divmod(...)`): core 0
# takes rows 0 and 1, core 1 row 2. Each core runs its own pipeline over
# its share: its prologue, its steps (numbered from 0 in its share: core
# 1's i = 0 is the grid's row 2), its epilogue. The cores form a loop
# marked parallel: random mode runs them in a permuted order.

# CHECK:      core = 0: start x[0:8, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
# CHECK-NEXT: core = 0, i = 0, j = 0: start x[0:8, 128:256] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
# CHECK-NEXT: core = 0, i = 0, j = 0: wait x_sems[0] 4096
# CHECK-NEXT: core = 0, i = 0, j = 0: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: core = 0, i = 0, j = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: core = 0, i = 0, j = 0: start y_window[0:1, 0:8, 0:128] -> y[0:8, 0:128] on y_sems[0]
# CHECK-NEXT: core = 0, i = 0, j = 1: start x[8:16, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
# CHECK-NEXT: core = 0, i = 0, j = 1: wait x_sems[1] 4096
# CHECK-NEXT: core = 0, i = 0, j = 1: invalidate y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: core = 0, i = 0, j = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: core = 0, i = 0, j = 1: start y_window[1:2, 0:8, 0:128] -> y[0:8, 128:256] on y_sems[1]
# CHECK-NEXT: core = 0, i = 0, j = 1: wait y_sems[0] 4096
# CHECK-NEXT: core = 0, i = 1, j = 0: start x[8:16, 128:256] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
# CHECK-NEXT: core = 0, i = 1, j = 0: wait x_sems[0] 4096
# CHECK-NEXT: core = 0, i = 1, j = 0: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: core = 0, i = 1, j = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: core = 0, i = 1, j = 0: start y_window[0:1, 0:8, 0:128] -> y[8:16, 0:128] on y_sems[0]
# CHECK-NEXT: core = 0, i = 1, j = 0: wait y_sems[1] 4096
# CHECK-NEXT: core = 0, i = 1, j = 1: wait x_sems[1] 4096
# CHECK-NEXT: core = 0, i = 1, j = 1: invalidate y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: core = 0, i = 1, j = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: core = 0, i = 1, j = 1: start y_window[1:2, 0:8, 0:128] -> y[8:16, 128:256] on y_sems[1]
# CHECK-NEXT: core = 0, i = 1, j = 1: wait y_sems[0] 4096
# CHECK-NEXT: core = 0: wait y_sems[1] 4096
# CHECK-NEXT: core = 1: start x[16:24, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
# CHECK-NEXT: core = 1, i = 0, j = 0: start x[16:24, 128:256] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
# CHECK-NEXT: core = 1, i = 0, j = 0: wait x_sems[0] 4096
# CHECK-NEXT: core = 1, i = 0, j = 0: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: core = 1, i = 0, j = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: core = 1, i = 0, j = 0: start y_window[0:1, 0:8, 0:128] -> y[16:24, 0:128] on y_sems[0]
# CHECK-NEXT: core = 1, i = 0, j = 1: wait x_sems[1] 4096
# CHECK-NEXT: core = 1, i = 0, j = 1: invalidate y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: core = 1, i = 0, j = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: core = 1, i = 0, j = 1: start y_window[1:2, 0:8, 0:128] -> y[16:24, 128:256] on y_sems[1]
# CHECK-NEXT: core = 1, i = 0, j = 1: wait y_sems[0] 4096
# CHECK-NEXT: core = 1: wait y_sems[1] 4096
# CHECK-NEXT: ran split: 12 DMAs, eager mode; final values:

kernel split(x: f32[24, 256] @hbm, y: f32[24, 256] @hbm) {
  pipeline grid=(3, 2) dimension_semantics=(parallel, arbitrary) cores=2
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = xw + 1.0
  }
}
