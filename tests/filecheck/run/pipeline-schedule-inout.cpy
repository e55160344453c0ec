# RUN: copyir run %s --fill-inputs iota --mode eager --trace | filecheck %s

# An input-output operand with buffers (2, 2), derived by hand from JAX
# 0.12's jax/_src/pallas/mosaic/pipeline.py (its interpret mode can run one
# only through `allocations`, which the Pallas frontend does not import):
# - y has in + out - 1 = 3 slots (line 338, `_total_buffer_count`) and two
#   semaphore arrays, `sem_recvs` and `sem_sends` (y_in_sems, y_out_sems);
# - it is fetched as an input (`copy_in`, `wait_in`: `is_input`), into the
#   slot its count of fetches gives, and never invalidated: the body reads
#   the fetched block;
# - the body's window is the copy-out slot (`current_ref` of an output), the
#   same counter as the fetch's since both advance at each block change;
# - it is written back as an output (`copy_out`), each write-back awaited
#   `out_buffer_count - 1` = 1 step later (line 1516) and the last in the
#   epilogue.

# CHECK:      start x[0:8, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
# CHECK-NEXT: start y[0:8, 0:128] -> y_window[0:1, 0:8, 0:128] on y_in_sems[0]
# CHECK-NEXT: i = 0: start x[8:16, 0:128] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
# CHECK-NEXT: i = 0: start y[8:16, 0:128] -> y_window[1:2, 0:8, 0:128] on y_in_sems[1]
# CHECK-NEXT: i = 0: wait x_sems[0] 4096
# CHECK-NEXT: i = 0: wait y_in_sems[0] 4096
# CHECK-NEXT: i = 0: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 0: start y_window[0:1, 0:8, 0:128] -> y[0:8, 0:128] on y_out_sems[0]
# CHECK-NEXT: i = 1: start x[16:24, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
# CHECK-NEXT: i = 1: start y[16:24, 0:128] -> y_window[2:3, 0:8, 0:128] on y_in_sems[2]
# CHECK-NEXT: i = 1: wait x_sems[1] 4096
# CHECK-NEXT: i = 1: wait y_in_sems[1] 4096
# CHECK-NEXT: i = 1: compute y_window[1:2, 0:8, 0:128]
# CHECK-NEXT: i = 1: start y_window[1:2, 0:8, 0:128] -> y[8:16, 0:128] on y_out_sems[1]
# CHECK-NEXT: i = 1: wait y_out_sems[0] 4096
# CHECK-NEXT: i = 2: start x[24:32, 0:128] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
# CHECK-NEXT: i = 2: start y[24:32, 0:128] -> y_window[0:1, 0:8, 0:128] on y_in_sems[0]
# CHECK-NEXT: i = 2: wait x_sems[0] 4096
# CHECK-NEXT: i = 2: wait y_in_sems[2] 4096
# CHECK-NEXT: i = 2: compute y_window[2:3, 0:8, 0:128]
# CHECK-NEXT: i = 2: start y_window[2:3, 0:8, 0:128] -> y[16:24, 0:128] on y_out_sems[2]
# CHECK-NEXT: i = 2: wait y_out_sems[1] 4096
# CHECK-NEXT: i = 3: wait x_sems[1] 4096
# CHECK-NEXT: i = 3: wait y_in_sems[0] 4096
# CHECK-NEXT: i = 3: compute y_window[0:1, 0:8, 0:128]
# CHECK-NEXT: i = 3: start y_window[0:1, 0:8, 0:128] -> y[24:32, 0:128] on y_out_sems[0]
# CHECK-NEXT: i = 3: wait y_out_sems[2] 4096
# CHECK-NEXT: wait y_out_sems[0] 4096
# CHECK-NEXT: ran acc: 12 DMAs, eager mode; final values:

kernel acc(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  pipeline grid=(4,)
      in    x block=(8, 128) index=(i) -> (i, 0)
      inout y block=(8, 128) index=(i) -> (i, 0) buffers=(2, 2)
      (xw, yw) {
    yw[...] = yw + xw
  }
}
