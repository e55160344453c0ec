# Each min below splits every piece of the one before it in two (their
# slopes differ, so no piece is empty that copyir could see): nine of them
# make 512 affine pieces, and each piece is a copy of the DMA in the stream.
# A min of several expressions at once, min(a, b, c, ...), is one piece per
# expression instead.

kernel too_many_pieces(x: f32[4096] @hbm) {
  buf = alloc f32[8] @vmem
  for i, j in grid(4, 4) {
    c1 = min(i, i - j + 1)
    c2 = min(c1, 2 * i - 4 * j + 2)
    c3 = min(c2, 3 * i - 9 * j + 3)
    c4 = min(c3, 4 * i - 16 * j + 4)
    c5 = min(c4, 5 * i - 25 * j + 5)
    c6 = min(c5, 6 * i - 36 * j + 6)
    c7 = min(c6, 7 * i - 49 * j + 7)
    c8 = min(c7, 8 * i - 64 * j + 8)
    c9 = min(c8, 9 * i - 81 * j + 9)
    # expected-error@+1 {{The mins and maxes of an index here split the loops' domain into more than 256 affine pieces, more than an op may have}}
    sync_copy x[ds(c9 + 2000, 8)] -> buf
  }
}
