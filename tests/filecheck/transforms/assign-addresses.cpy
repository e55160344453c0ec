# RUN: copyir opt -p expand-windows,assign-addresses --emit cpy %s | filecheck %s
# RUN: copyir opt -p "expand-windows,assign-addresses{target=small}" --emit cpy %s | filecheck %s --check-prefix=SMALL

# Parameters in HBM, scratch in VMEM and SMEM, in program order, each at
# the next address its space's alignment allows (512 bytes for HBM and VMEM
# in both built-in targets, 4 for SMEM). Semaphores get consecutive ids; an
# array takes one id per element.

# CHECK-LABEL: kernel layout(
# CHECK-NEXT:  # target default: x at hbm+0, y at hbm+512, z at hbm+1024
# SMALL:       # target small: x at hbm+0
kernel layout(x: f32[100] @hbm, y: u8[3] @hbm, z: f32[4, 4] @hbm) {
  # CHECK-NEXT: a = alloc u8[3] @vmem  # vmem+0
  a = alloc u8[3] @vmem
  # CHECK-NEXT: b = alloc f32[100] @vmem  # vmem+512
  b = alloc f32[100] @vmem
  # CHECK-NEXT: t = alloc i32[3] @smem  # smem+0
  t = alloc i32[3] @smem
  # CHECK-NEXT: u = alloc u8[5] @smem  # smem+12
  u = alloc u8[5] @smem
  # CHECK-NEXT: v = alloc i32[1] @smem  # smem+20
  v = alloc i32[1] @smem
  # CHECK-NEXT: s = semaphore  # sem 0
  s = semaphore
  # CHECK-NEXT: sems = semaphore[2, 3]  # sem 1
  sems = semaphore[2, 3]
  # CHECK-NEXT: r = semaphore  # sem 7
  r = semaphore
  # A window comes after the allocs before it.
  # CHECK-NEXT: bz = alloc f32[2, 2, 4] @vmem  # vmem+1024
  bz = buffered_ref z, block=(2, 4), buffers=2
}

# A scope's buffers and semaphores take theirs among the rest, in program
# order, once (a scope in a loop reuses them on every entry; two scopes one
# after the other do not share memory).
# CHECK-LABEL: kernel scoped(
# CHECK-NEXT:  # target default: x at hbm+0
kernel scoped(x: f32[100] @hbm) {
  # CHECK-NEXT: a = alloc f32[100] @vmem  # vmem+0
  a = alloc f32[100] @vmem
  # CHECK-NEXT: for i in range(4) {
  for i in range(4) {
    # CHECK-NEXT: scope {
    scope {
      # CHECK-NEXT: b = alloc f32[100] @vmem  # vmem+512
      b = alloc f32[100] @vmem
      # CHECK-NEXT: s = semaphore  # sem 0
      s = semaphore
    # CHECK-NEXT: }
    }
  # CHECK-NEXT: }
  }
  # CHECK-NEXT: scope {
  scope {
    # CHECK-NEXT: c = alloc f32[100] @vmem  # vmem+1024
    c = alloc f32[100] @vmem
    # CHECK-NEXT: t = semaphore[2]  # sem 1
    t = semaphore[2]
  # CHECK-NEXT: }
  }
  # CHECK-NEXT: d = alloc f32[100] @vmem  # vmem+1536
  d = alloc f32[100] @vmem
}
