# RUN: copyir opt -p expand-windows --emit cpy %s | filecheck %s

# The worked example of the design: a (1000, 384) f32 array in (128, 128)
# blocks, block (7, 2) into slot 1: rows 896:1000 (the ragged edge: 104
# rows, never past the array), columns 256:384, window [1, 0:104, 0:128].

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
  # The rest of the slot is padding a body may read: poison (NaN) is
  # written there, as Pallas' interpret mode pads with NaN, by an opaque
  # computation a run follows to the outputs it reaches.
  # CHECK-NEXT: opaque "padding of a cut block" () -> (bx[1, 104:128, :])  # block (7, 2) slot 1
  buffered_copy x -> bx[7, 2], slot=1
  # Copy-out reverses the DMA.
  # CHECK-NEXT: [[T:v[0-9]+]] = semaphore  # block (0, 0) slot 0
  # CHECK-NEXT: [[B:v[0-9]+]] = y[0:128, 0:128]  # block (0, 0) slot 0
  # CHECK-NEXT: [[A:v[0-9]+]] = bx[0, :, :]  # block (0, 0) slot 0
  # CHECK-NEXT: copy_start [[A]] -> [[B]], [[T]]  # block (0, 0) slot 0
  buffered_copy bx[0, 0] -> y

  # Squeezed (None) rows and Element columns: row 3, elements 50:98.
  # CHECK: rows = alloc f32[1, 48] @vmem
  rows = buffered_ref x, block=(None, Element(48)), buffers=1
  # CHECK-NEXT: [[RS:v[0-9]+]] = semaphore  # block (3, 50) slot 0
  # CHECK-NEXT: [[RX:v[0-9]+]] = x[3, 50:98]  # block (3, 50) slot 0
  # CHECK-NEXT: [[RW:v[0-9]+]] = rows[0, :]  # block (3, 50) slot 0
  # CHECK-NEXT: copy_start [[RX]] -> [[RW]], [[RS]]  # block (3, 50) slot 0
  buffered_copy x -> rows[3, 50]
  # Element offsets near the end copy what is left: 360:384, window [0, 0:24].
  # CHECK: = x[7, 360:384]  # block (7, 360) slot 0
  # CHECK-NEXT: = rows[0, 0:24]  # block (7, 360) slot 0
  # CHECK-NEXT: copy_start {{v[0-9]+}} -> {{v[0-9]+}}, {{v[0-9]+}}  # block (7, 360) slot 0
  # CHECK: opaque "padding of a cut block" () -> (rows[0, 24:48])  # block (7, 360) slot 0
  buffered_copy x -> rows[7, 360]

  # Trivial windowing: the whole array to or from the slot.
  # CHECK: whole = alloc i32[1, 100] @vmem
  whole = buffered_ref v, block=(100,), buffers=1
  # CHECK-NEXT: = semaphore  # block (0,) slot 0
  # CHECK-NEXT: = v[:]  # block (0,) slot 0
  # CHECK-NEXT: = whole[0, :]  # block (0,) slot 0
  # CHECK-NEXT: copy_start {{v[0-9]+}} -> {{v[0-9]+}}, {{v[0-9]+}}  # block (0,) slot 0
  buffered_copy v -> whole
}
