# A loop whose first and last iterations do more, with `when` (Pallas'
# pl.when): blocks stream in with prefetch and are written back behind, so
# block i's write-back is still in flight while block i + 1 arrives. The
# prologue (`when i == 0`) starts the first fetch; each later iteration first
# waits the previous write-back, which frees the slot the next fetch goes
# into; the epilogue (`when i == 7`) waits the last write-back, so nothing
# is in flight when the kernel ends.

kernel loop_prologue_epilogue(x: f32[64, 256] @hbm, y: f32[64, 256] @hbm) {
  buf = alloc f32[2, 8, 256] @vmem
  sin = semaphore[2]
  sout = semaphore[2]
  for i in range(8) {
    slot = i % 2
    other = (i + 1) % 2
    when i == 0 {                                    # prologue
      copy_start x[0:8] -> buf[0], sin[0]
    }
    when i >= 1 {                                    # block i - 1 is written
      copy_wait buf[other] -> y[ds(8 * (i - 1), 8)], sout[other]
    }
    when i < 7 {                                     # prefetch block i + 1
      copy_start x[ds(8 * (i + 1), 8)] -> buf[other], sin[other]
    }
    copy_wait x[ds(8 * i, 8)] -> buf[slot], sin[slot]
    copy_start buf[slot] -> y[ds(8 * i, 8)], sout[slot]
    when i == 7 {                                    # epilogue
      copy_wait buf[slot] -> y[ds(8 * i, 8)], sout[slot]
    }
  }
}
