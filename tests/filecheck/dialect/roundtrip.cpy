# RUN: copyir verify --emit cpy %s | filecheck %s
# RUN: copyir verify --emit mlir %s | copyir verify --input-format mlir --emit cpy - | filecheck %s

# Every statement of the authoring syntax prints back as written (comments
# aside), and survives a trip through the MLIR form.

# CHECK:      kernel all_ops(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm, t: i32[16] @hbm, v: bf16[100] @hbm) {
kernel all_ops(x: f32[64, 128] @hbm, y: f32[64, 128] @any,
               t: i32[16], v: bfloat16[100] @hbm) {
  # CHECK-NEXT:   buf = alloc f32[64, 128] @vmem
  buf = alloc f32[64, 128] @vmem
  # CHECK-NEXT:   small = alloc i32[16] @smem
  small = alloc int32[16] @smem
  # CHECK-NEXT:   s = semaphore
  s = semaphore
  # CHECK-NEXT:   sems = semaphore[2, 3]
  sems = semaphore[2, 3]
  # CHECK-NEXT:   copy_start x[0:32] -> buf[0:32, :], s
  copy_start x[0:32] -> buf[:32, 0:128], s
  # CHECK-NEXT:   copy_start x[32:64, :] -> buf[32:64, :], sems[1, 2], add, priority=1
  copy_start x[32:64, :] -> buf[32:, :], sems[1, 2], priority=1, add
  # CHECK-NEXT:   copy_wait x -> buf, s
  copy_wait x -> buf, s
  # CHECK-NEXT:   copy_wait x[32:64] -> buf[32:64], sems[1, 2]
  dma "wait" x[32:64] -> buf[32:64], sems[1, 2]
  # CHECK-NEXT:   row = x[3]
  row = x[3]
  # CHECK-NEXT:   copy_start row[0:8] -> y[5][8:16], s
  copy_start row[0:8] -> y[5][8:16], s
  # CHECK-NEXT:   copy_wait row[0:8] -> y[5, 8:16], s
  dma wait row[0:8] -> y[5, 8:16], s
  # CHECK-NEXT:   sync_copy (t, {a: x, b: [y]}) -> (small, {a: buf, b: [x]}), add
  sync_copy (t, {b: [y], a: x}) -> (small, {b: [x], a: buf}), add
  # CHECK-NEXT:   sync_copy () -> ()
  sync_copy () -> ()
  # CHECK-NEXT:   sync_copy (t,) -> (small,)
  sync_copy (t,) -> (small,)
  # CHECK-NEXT:   sync_copy t -> small
  sync_copy (t) -> small
  # CHECK-NEXT:   bx = buffered_ref f32[64, 128], block=(48, 128), buffers=2
  bx = buffered_ref x, block=(48, Blocked(128))
  # CHECK-NEXT:   buffered_copy x -> bx[1, 0], slot=1
  buffered_copy x -> bx[1, 0], slot=1
  # CHECK-NEXT:   buffered_copy bx[1, 0] -> y
  buffered_copy bx[1, 0] -> y, slot=0
  # CHECK-NEXT:   bv = buffered_ref bf16[100], block=(Element(48),), buffers=1, space=smem, padded
  bv = buffered_ref bf16[100], block=(Element(48),), padded, buffers=1, space=smem
  # CHECK-NEXT:   br = buffered_ref f32[64, 128], block=(None, 128), buffers=3
  br = buffered_ref x, block=(None, 128), buffers=3
  # CHECK-NEXT:   whole = buffered_ref f32[64, 128], block=(64, 128), buffers=1
  whole = buffered_ref x, block=(64, 128), buffers=1
  # CHECK-NEXT:   buffered_copy x -> whole
  buffered_copy x -> whole
  # CHECK-NEXT: }
}

# CHECK-EMPTY:
# CHECK-NEXT: kernel empty() {
# CHECK-NEXT: }
kernel empty() {}

# CHECK-EMPTY:
# CHECK-NEXT: kernel only_params(out_1: u8[3] @hbm) {
# CHECK-NEXT: }
kernel only_params(out_1: uint8[3]) {
}
