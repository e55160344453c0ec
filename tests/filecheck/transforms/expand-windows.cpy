# RUN: copyir opt -p expand-windows --emit cpy %s | filecheck %s

# The worked example of the design: a (1000, 384) f32 array in (128, 128)
# blocks, block (7, 2) into slot 1: rows 896:1000 (the ragged edge: 104
# rows, 13 whole tiles of 8, so Pallas' rounding to the tiling keeps it in
# the array), columns 256:384, window [1, 0:104, 0:128].

# CHECK-LABEL: kernel windows(
kernel windows(x: f32[1000, 384] @hbm, y: f32[1000, 384] @hbm, v: i32[100] @hbm) {
  # CHECK-NEXT: bx = alloc f32[2, 128, 128] @vmem
  bx = buffered_ref x, block=(128, 128), buffers=2
  # The semaphore is made at the kernel's top level (once, even in a loop).
  # CHECK-NEXT: [[S:v[0-9]+]] = semaphore  # block (7, 2) slot 1
  # The start and the wait share their views, each a statement of its own.
  # CHECK-NEXT: [[X:v[0-9]+]] = x[896:1000, 256:384]  # block (7, 2) slot 1
  # CHECK-NEXT: [[W:v[0-9]+]] = bx[1, 0:104, :]  # block (7, 2) slot 1
  # CHECK-NEXT: copy_start [[X]] -> [[W]], [[S]]  # block (7, 2) slot 1
  # CHECK-NEXT: copy_wait [[X]] -> [[W]], [[S]]  # block (7, 2) slot 1
  # The rest of the slot is padding a body may read: it keeps what the slot
  # held, as Pallas' BufferedRef leaves it, marked by an opaque computation
  # a run follows to the outputs it reaches.
  # CHECK-NEXT: opaque "padding of a cut block" () -> (bx[1, 104:128, :]) keeps  # block (7, 2) slot 1
  buffered_copy x -> bx[7, 2], slot=1
  # Copy-out reverses the DMA.
  # CHECK-NEXT: [[T:v[0-9]+]] = semaphore  # block (0, 0) slot 0
  # CHECK-NEXT: [[B:v[0-9]+]] = y[0:128, 0:128]  # block (0, 0) slot 0
  # CHECK-NEXT: [[A:v[0-9]+]] = bx[0, :, :]  # block (0, 0) slot 0
  # CHECK-NEXT: copy_start [[A]] -> [[B]], [[T]]  # block (0, 0) slot 0
  buffered_copy bx[0, 0] -> y

  # Squeezed (None) rows and Element columns (a whole number of 128-lane
  # tiles): row 3, elements 50:306.
  # CHECK: rows = alloc f32[1, 256] @vmem
  rows = buffered_ref x, block=(None, Element(256)), buffers=1
  # CHECK-NEXT: [[RS:v[0-9]+]] = semaphore  # block (3, 50) slot 0
  # CHECK-NEXT: [[RX:v[0-9]+]] = x[3, 50:306]  # block (3, 50) slot 0
  # CHECK-NEXT: [[RW:v[0-9]+]] = rows[0, :]  # block (3, 50) slot 0
  # CHECK-NEXT: copy_start [[RX]] -> [[RW]], [[RS]]  # block (3, 50) slot 0
  buffered_copy x -> rows[3, 50]
  # Element offsets near the end copy what is left, rounded up to the
  # tiling: 256:384, window [0, 0:128].
  # CHECK: = x[7, 256:384]  # block (7, 256) slot 0
  # CHECK-NEXT: = rows[0, 0:128]  # block (7, 256) slot 0
  # CHECK-NEXT: copy_start {{v[0-9]+}} -> {{v[0-9]+}}, {{v[0-9]+}}  # block (7, 256) slot 0
  # CHECK: opaque "padding of a cut block" () -> (rows[0, 128:256]) keeps  # block (7, 256) slot 0
  buffered_copy x -> rows[7, 256]

  # A bounded slice of 12 rows in BoundedSlice(16): Pallas (JAX 0.12)
  # rounds its DMA up to the 8-row tile, 16 rows, so nothing is left over.
  # CHECK: band = alloc f32[1, 16, 128] @vmem
  band = buffered_ref x, block=(BoundedSlice(16, 12), 128), buffers=1
  # CHECK-NEXT: = semaphore  # block (40, 1) slot 0
  # CHECK-NEXT: = x[40:56, 128:256]  # block (40, 1) slot 0
  # CHECK-NEXT: = band[0, :, :]  # block (40, 1) slot 0
  # CHECK-NEXT: copy_start
  # CHECK-NEXT: copy_wait
  # CHECK-NOT: opaque
  buffered_copy x -> band[40, 1]

  # A padded BufferedRef (a kernel grid's blocks) copies the cut block and
  # writes poison (NaN) past it, as interpret mode pads a pallas_call's
  # inputs to whole blocks.
  # CHECK: padded = alloc f32[1, 48, 128] @vmem
  padded = buffered_ref x, block=(48, 128), buffers=1, padded
  # CHECK: = x[960:1000, 0:128]  # block (20, 0) slot 0
  # CHECK: opaque "padding of a cut block" () -> (padded[0, 40:48, :])  # block (20, 0) slot 0
  buffered_copy x -> padded[20, 0]

  # Trivial windowing: the whole array to or from the slot.
  # CHECK: whole = alloc i32[1, 100] @vmem
  whole = buffered_ref v, block=(100,), buffers=1
  # CHECK-NEXT: = semaphore  # block (0,) slot 0
  # CHECK-NEXT: = v[:]  # block (0,) slot 0
  # CHECK-NEXT: = whole[0, :]  # block (0,) slot 0
  # CHECK-NEXT: copy_start {{v[0-9]+}} -> {{v[0-9]+}}, {{v[0-9]+}}  # block (0,) slot 0
  buffered_copy v -> whole
}
