# A (1000, 384) f32 array copied HBM -> VMEM -> HBM through (128, 128)
# blocks of a double-buffered BufferedRef. The grid is 8 x 3 blocks; 128
# does not divide 1000, so the last row of blocks is ragged: block (7, j)
# covers rows 896:1000 and lands in window [slot, 0:104, 0:128]. copyir
# uses logical bounds and never reads past the array.
#
# Without loops (a later issue) the grid is written out block by block,
# alternating window slots.

kernel windows(x: f32[1000, 384] @hbm, y: f32[1000, 384] @hbm) {
  bx = buffered_ref x, block=(128, 128), buffers=2   # window f32[2, 128, 128] @vmem
  buffered_copy x -> bx[0, 0], slot=0
  buffered_copy bx[0, 0] -> y, slot=0
  buffered_copy x -> bx[0, 1], slot=1
  buffered_copy bx[0, 1] -> y, slot=1
  buffered_copy x -> bx[0, 2], slot=0
  buffered_copy bx[0, 2] -> y, slot=0
  buffered_copy x -> bx[1, 0], slot=1
  buffered_copy bx[1, 0] -> y, slot=1
  buffered_copy x -> bx[1, 1], slot=0
  buffered_copy bx[1, 1] -> y, slot=0
  buffered_copy x -> bx[1, 2], slot=1
  buffered_copy bx[1, 2] -> y, slot=1
  buffered_copy x -> bx[2, 0], slot=0
  buffered_copy bx[2, 0] -> y, slot=0
  buffered_copy x -> bx[2, 1], slot=1
  buffered_copy bx[2, 1] -> y, slot=1
  buffered_copy x -> bx[2, 2], slot=0
  buffered_copy bx[2, 2] -> y, slot=0
  buffered_copy x -> bx[3, 0], slot=1
  buffered_copy bx[3, 0] -> y, slot=1
  buffered_copy x -> bx[3, 1], slot=0
  buffered_copy bx[3, 1] -> y, slot=0
  buffered_copy x -> bx[3, 2], slot=1
  buffered_copy bx[3, 2] -> y, slot=1
  buffered_copy x -> bx[4, 0], slot=0
  buffered_copy bx[4, 0] -> y, slot=0
  buffered_copy x -> bx[4, 1], slot=1
  buffered_copy bx[4, 1] -> y, slot=1
  buffered_copy x -> bx[4, 2], slot=0
  buffered_copy bx[4, 2] -> y, slot=0
  buffered_copy x -> bx[5, 0], slot=1
  buffered_copy bx[5, 0] -> y, slot=1
  buffered_copy x -> bx[5, 1], slot=0
  buffered_copy bx[5, 1] -> y, slot=0
  buffered_copy x -> bx[5, 2], slot=1
  buffered_copy bx[5, 2] -> y, slot=1
  buffered_copy x -> bx[6, 0], slot=0
  buffered_copy bx[6, 0] -> y, slot=0
  buffered_copy x -> bx[6, 1], slot=1
  buffered_copy bx[6, 1] -> y, slot=1
  buffered_copy x -> bx[6, 2], slot=0
  buffered_copy bx[6, 2] -> y, slot=0
  buffered_copy x -> bx[7, 0], slot=1
  buffered_copy bx[7, 0] -> y, slot=1
  buffered_copy x -> bx[7, 1], slot=0
  buffered_copy bx[7, 1] -> y, slot=0
  buffered_copy x -> bx[7, 2], slot=1
  buffered_copy bx[7, 2] -> y, slot=1
}
