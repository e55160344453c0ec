# RUN: copyir run %s --fill-inputs iota --mode eager --trace | filecheck %s

# JAX 0.12's emit_pipeline schedule (jax/_src/pallas/mosaic/pipeline.py)
# for inputs with 4, 2 and 3 buffers and an output with 3, grid (4,):
# - the prologue is step-major (line 2079: `for step in
#   range(scheduler.num_stages - 1)`, each step over all operands, each
#   input stopping at its own `in_buffer_count - 1` in `initialize_step`):
#   a, b, c's block 0, then a and c's block 1, then a's block 2;
# - each step prefetches `buffers - 1` steps ahead (`copy_in`), then waits
#   its blocks (`wait_in`), then starts y's write-back (`copy_out`) and
#   waits the one started `out_buffer_count - 1` = 2 steps before
#   (line 1516, `wait_out`);
# - the epilogue waits the last two write-backs, the older first (line
#   2097, `finalize_step` with lags 1 then 0).
# tests/pallas/test_pipelines_side_by_side.py runs the same schedule on a
# (4, 2) grid side by side with 0.12's interpret mode, event for event.

# CHECK:      start a[0:8, 0:128] -> a_window[0:1, 0:8, 0:128] on a_sems[0]
# CHECK-NEXT: start b[0:8, 0:128] -> b_window[0:1, 0:8, 0:128] on b_sems[0]
# CHECK-NEXT: start c[0:8, 0:128] -> c_window[0:1, 0:8, 0:128] on c_sems[0]
# CHECK-NEXT: start a[8:16, 0:128] -> a_window[1:2, 0:8, 0:128] on a_sems[1]
# CHECK-NEXT: start c[8:16, 0:128] -> c_window[1:2, 0:8, 0:128] on c_sems[1]
# CHECK-NEXT: start a[16:24, 0:128] -> a_window[2:3, 0:8, 0:128] on a_sems[2]
# CHECK-NEXT: i = 0: start a[24:32, 0:128] -> a_window[3:4, 0:8, 0:128] on a_sems[3]
# CHECK-NEXT: i = 0: start b[8:16, 0:128] -> b_window[1:2, 0:8, 0:128] on b_sems[1]
# CHECK-NEXT: i = 0: start c[16:24, 0:128] -> c_window[2:3, 0:8, 0:128] on c_sems[2]
# CHECK-NEXT: i = 0: wait a_sems[0] 4096
# CHECK-NEXT: i = 0: wait b_sems[0] 4096
# CHECK-NEXT: i = 0: wait c_sems[0] 4096
# CHECK-NEXT: i = 0: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 0: start y_window[0:1, 0:8, 0:128] -> y[0:8, 0:128] on y_sems[0]
# CHECK-NEXT: i = 1: start b[16:24, 0:128] -> b_window[0:1, 0:8, 0:128] on b_sems[0]
# CHECK-NEXT: i = 1: start c[24:32, 0:128] -> c_window[0:1, 0:8, 0:128] on c_sems[0]
# CHECK-NEXT: i = 1: wait a_sems[1] 4096
# CHECK-NEXT: i = 1: wait b_sems[1] 4096
# CHECK-NEXT: i = 1: wait c_sems[1] 4096
# CHECK-NEXT: i = 1: invalidate y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 1: start y_window[1:2, 0:8, 0:128] -> y[8:16, 0:128] on y_sems[1]
# CHECK-NEXT: i = 2: start b[24:32, 0:128] -> b_window[1:2, 0:8, 0:128] on b_sems[1]
# CHECK-NEXT: i = 2: wait a_sems[2] 4096
# CHECK-NEXT: i = 2: wait b_sems[0] 4096
# CHECK-NEXT: i = 2: wait c_sems[2] 4096
# CHECK-NEXT: i = 2: invalidate y_window[2:3, 0:8, 0:128]
# CHECK-NEXT: i = 2: compute y_window[2:3, 0:8, 0:128]
# CHECK-NEXT: i = 2: start y_window[2:3, 0:8, 0:128] -> y[16:24, 0:128] on y_sems[2]
# CHECK-NEXT: i = 2: wait y_sems[0] 4096
# CHECK-NEXT: i = 3: wait a_sems[3] 4096
# CHECK-NEXT: i = 3: wait b_sems[1] 4096
# CHECK-NEXT: i = 3: wait c_sems[0] 4096
# CHECK-NEXT: i = 3: invalidate y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 3: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 3: start y_window[0:1, 0:8, 0:128] -> y[24:32, 0:128] on y_sems[0]
# CHECK-NEXT: i = 3: wait y_sems[1] 4096
# CHECK-NEXT: wait y_sems[2] 4096
# CHECK-NEXT: wait y_sems[0] 4096
# CHECK-NEXT: ran three: 16 DMAs, eager mode; final values:

kernel three(a: f32[32, 128] @hbm, b: f32[32, 128] @hbm, c: f32[32, 128] @hbm,
             y: f32[32, 128] @hbm) {
  pipeline grid=(4,)
      in  a block=(8, 128) index=(i) -> (i, 0) buffers=4
      in  b block=(8, 128) index=(i) -> (i, 0)
      in  c block=(8, 128) index=(i) -> (i, 0) buffers=3
      out y block=(8, 128) index=(i) -> (i, 0) buffers=3
      (aw, bw, cw, yw) {
    yw[...] = aw + bw + cw
  }
}
