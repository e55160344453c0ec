# RUN: copyir opt -p expand-min-max --emit cpy %s | filecheck %s
# RUN: copyir lower --kernel clamp %s | filecheck %s --check-prefix=STREAM

# Each op that reads a min or max becomes one copy per affine piece, under
# a `when` of the piece's constraints: min(128 * i, 872) is 128 * i where
# 128 * i <= 872 and 872 elsewhere. A `when` on a max takes its condition
# on each piece, its body kept once; a min of a max has the pieces of both
# that can hold together (three, not four). The stream has one predicated
# instruction per piece, however many iterations the loop has.

# CHECK-LABEL: kernel clamp(
kernel clamp(x: f32[1000, 128] @hbm, y: f32[1000, 128] @hbm) {
  buf = alloc f32[128, 128] @vmem
  s = semaphore
  # CHECK: for i in range(8) {
  for i in range(8) {
    start = min(128 * i, 872)
    # CHECK-NEXT: when 128 * i <= 872 {
    # CHECK-NEXT:   copy_start x[ds(128 * i, 128)] -> buf, s
    # CHECK-NEXT: }
    # CHECK-NEXT: when 128 * i >= 873 {
    # CHECK-NEXT:   copy_start x[872:1000] -> buf, s
    # CHECK-NEXT: }
    copy_start x[ds(start, 128)] -> buf, s
    # CHECK-NEXT: when 128 * i <= 872 {
    # CHECK-NEXT:   copy_wait x[ds(128 * i, 128)] -> buf, s
    # CHECK-NEXT: }
    # CHECK-NEXT: when 128 * i >= 873 {
    # CHECK-NEXT:   copy_wait x[872:1000] -> buf, s
    # CHECK-NEXT: }
    copy_wait x[ds(start, 128)] -> buf, s
    c = max(128 * i - 128, 0)
    # CHECK:      when 128 * i >= 128 and 128 * i <= 383 or 128 * i <= 127 {
    when c < 256 {
      # CHECK-NEXT: when 128 * i >= 128 and 128 * i <= 872 {
      # CHECK-NEXT:   copy_start buf -> y[ds(128 * i, 128)], s
      # CHECK-NEXT: }
      # CHECK-NEXT: when 128 * i >= 128 and 128 * i >= 873 {
      # CHECK-NEXT:   copy_start buf -> y[872:1000], s
      # CHECK-NEXT: }
      # CHECK-NEXT: when 128 * i <= 127 {
      # CHECK-NEXT:   copy_start buf -> y[128:256], s
      # CHECK-NEXT: }
      copy_start buf -> y[ds(min(c + 128, 872), 128)], s
      copy_wait buf -> y[0:128], s
    }
  }
}

# STREAM:      dma.loop "i" 8 {
# STREAM-NEXT:   dma.start "hbm" {(d0) -> ((d0 * 65536))} {{.*}} if {(d0) : (((d0 * -128) + 872) >= 0)}
# STREAM-NEXT:   dma.start "hbm" 446464 {{.*}} if {(d0) : (((d0 * 128) + -873) >= 0)}
# STREAM-NEXT:   dma.wait sem 0 bytes 65536 if {(d0) : (((d0 * -128) + 872) >= 0)}
# STREAM-NEXT:   dma.wait sem 0 bytes 65536 if {(d0) : (((d0 * 128) + -873) >= 0)}
# STREAM-NEXT:   dma.start "vmem" {{.*}} -> "hbm" {(d0) -> (((d0 * 65536) + 512000))}
# STREAM-NEXT:   dma.start "vmem" {{.*}} -> "hbm" 958464
# STREAM-NEXT:   dma.start "vmem" {{.*}} -> "hbm" 577536
# STREAM-NEXT:   dma.wait
# STREAM-NEXT: }

# Window copies and semaphore indices take a piece's constant as static.

# CHECK-LABEL: kernel windows(
kernel windows(x: f32[1000, 128] @hbm, y: f32[1000, 128] @hbm) {
  bx = buffered_ref x, block=(128, 128), buffers=2
  sems = semaphore[4]
  # CHECK: for i in range(10) {
  for i in range(10) {
    b = min(i, 7)
    # CHECK-NEXT: when i <= 7 {
    # CHECK-NEXT:   [[SLOT:v[0-9]+]] = i % 2
    # CHECK-NEXT:   buffered_copy start x -> bx[i, 0], sems[i % 4], slot=[[SLOT]]
    # CHECK-NEXT: }
    # CHECK-NEXT: when i >= 8 {
    # CHECK-NEXT:   buffered_copy start x -> bx[7, 0], sems[3], slot=1
    # CHECK-NEXT: }
    buffered_copy start x -> bx[b, 0], sems[b % 4], slot=b % 2
    # CHECK:      buffered_copy wait x -> bx[7, 0], sems[3], slot=1
    buffered_copy wait x -> bx[b, 0], sems[b % 4], slot=b % 2
    buffered_copy bx[b, 0] -> y, slot=b % 2
  }
}
