# A ragged (1000, 384) f32 grid through a BufferedRef of (128, 128) blocks,
# with asynchronous window copies and prefetch. The grid is 8 x 3 blocks,
# walked row-major (`grid`, last index fastest); 128 does not divide 1000,
# so the last row of blocks is ragged: block (7, j) covers rows 896:1000 and
# lands in window [slot, 0:104, 0:128]. At step s = 3 * i + j the next block
# in walk order, ((s + 1) // 3, (s + 1) % 3), is started into the other slot
# before block (i, j) is waited and copied out of its own. Each window copy
# names the semaphore it signals, one per slot.

kernel loop_windows(x: f32[1000, 384] @hbm, y: f32[1000, 384] @hbm) {
  bx = buffered_ref x, block=(128, 128), buffers=2   # window f32[2, 128, 128] @vmem
  sems = semaphore[2]
  buffered_copy start x -> bx[0, 0], sems[0], slot=0
  for i, j in grid(8, 3) {
    step = 3 * i + j
    slot = step % 2
    when step + 1 < 24 {
      buffered_copy start x -> bx[(step + 1) // 3, (step + 1) % 3], sems[(step + 1) % 2], slot=(step + 1) % 2
    }
    buffered_copy wait x -> bx[i, j], sems[slot], slot=slot
    buffered_copy bx[i, j] -> y, slot=slot
  }
}
