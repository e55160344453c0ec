# RUN: copyir verify --split-input-file --verify-diagnostics %s

# The limits of a run (copyir/limits.py, README "Limits"): verify refuses a
# program beyond them at its loop or pipeline, before it checks anything at
# every iteration, so that what it accepts lowers and runs.

# A loop nest of more iterations than a run can check, with a dynamic view
# that would otherwise be checked at each of them.
kernel k(x: f32[8] @hbm, y: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  # expected-error@+1 {{Loop i runs 1000000000000 iterations in all, more than the limit of 8388608 that a run can check}}
  for i in range(1000000000000) {
    copy_start x[ds(i % 8, 1)] -> buf[ds(i % 8, 1)], s
    copy_wait x[ds(i % 8, 1)] -> buf[ds(i % 8, 1)], s
  }
}

# -----

# A grid's product is exact, however large (2**62 * 4 wraps to 0 in 64 bits).
kernel k(x: f32[8] @hbm, y: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  # expected-error@+1 {{Loop i, j runs 18446744073709551616 iterations in all, more than the limit of 8388608 that a run can check}}
  for i, j in grid(4611686018427387904, 4) {
    copy_start x -> buf, s
    copy_wait x -> buf, s
  }
}

# -----

# A nest counts every enclosing loop's iterations.
kernel k(x: f32[8] @hbm, y: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  for i in range(4096) {
    # expected-error@+1 {{Loop j runs 8392704 iterations in all, more than the limit of 8388608 that a run can check}}
    for j in range(2049) {
      copy_start x -> buf, s
      copy_wait x -> buf, s
    }
  }
}

# -----

# So does a pipeline's grid.
kernel k(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  # expected-error@+1 {{The pipeline runs 18446744073709551616 iterations in all, more than the limit of 8388608 that a run can check}}
  pipeline grid=(4611686018427387904, 4)
      in  x block=(8, 128) index=(i, j) -> (0, 0)
      out y block=(8, 128) index=(i, j) -> (0, 0)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# Sibling loops each within the limit, whose instructions run more times in
# all than a run holds: the error names the loop that passes the limit.
kernel k(x: f32[8] @hbm, y: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  for i in range(4194304) {
    copy_start x -> buf, s
    copy_wait x -> buf, s
  }
  # expected-error@+1 {{Loop j brings the events the kernel runs to 12582912, more than the limit of 8388608 that a run can check}}
  for j in range(4194304) {
    copy_start x -> buf, s
    copy_wait x -> buf, s
  }
}

# -----

# Index arithmetic whose bounds over the loops' ranges reach the run's limit
# on addresses, though its values stay inside the buffer.
kernel k(x: f32[8] @hbm, y: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  for i in range(8) {
    # expected-error@+1 {{The index arithmetic of x[ds((i + 4611686018427387904) % 8, 1)] reaches the limit of 2305843009213693952 on a run's addresses over the loops' ranges}}
    copy_start x[ds((i + 4611686018427387904) % 8, 1)] -> buf[ds(i, 1)], s
    copy_wait x[ds((i + 4611686018427387904) % 8, 1)] -> buf[ds(i, 1)], s
  }
}

# -----

# So does a window copy's block index...
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(8) {
    # expected-error@+1 {{The index arithmetic of bx reaches the limit of 2305843009213693952 on a run's addresses over the loops' ranges}}
    buffered_copy x -> bx[(i + 4611686018427387904) % 8, 0], slot=0
  }
}

# -----

# ... and a pipeline's index map.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{The index arithmetic of x reaches the limit of 2305843009213693952 on a run's addresses over the loops' ranges}}
  pipeline grid=(8,)
      in  x block=(8, 128) index=(i) -> ((i + 4611686018427387904) % 8, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}
