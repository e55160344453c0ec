# RUN: copyir opt -p expand-pytree-copies --emit cpy %s | filecheck %s
# RUN: copyir opt -p expand-pytree-copies --emit mlir %s | filecheck %s --check-prefix=MLIR

# A sync_copy becomes one semaphore, a start per leaf in leaf order (records
# by sorted key), then a wait per leaf in the same order. `add` goes to
# every start; an empty tree lowers to nothing.

# CHECK-LABEL: kernel trees(
kernel trees(p: f32[8] @hbm, q: i32[4] @hbm, r: f32[8] @hbm, s: i32[4] @hbm) {
  vp = alloc f32[8] @vmem
  vq = alloc i32[4] @vmem
  # CHECK:      [[SEM:v[0-9]+]] = semaphore
  # CHECK-NEXT: copy_start p -> vp, [[SEM]], add  # leaf ['a']
  # CHECK-NEXT: copy_start q -> vq, [[SEM]], add  # leaf ['b'][0]
  # CHECK-NEXT: copy_wait p -> vp, [[SEM]]  # leaf ['a']
  # CHECK-NEXT: copy_wait q -> vq, [[SEM]]  # leaf ['b'][0]
  sync_copy {b: [q], a: p} -> {a: vp, b: [vq]}, add
  # CHECK-NEXT: [[SEM2:v[0-9]+]] = semaphore
  # CHECK-NEXT: copy_start vp -> r, [[SEM2]]
  # CHECK-NEXT: copy_wait vp -> r, [[SEM2]]
  sync_copy vp -> r
  sync_copy () -> ()
  # CHECK-NEXT: }
}

# MLIR:      copy.dma "start" %p, %vp, %{{.*}} add : {{.*}} loc("leaf ['a']"("{{.*}}expand-pytree-copies.cpy":17:3))
# MLIR-NEXT: copy.dma "start" %q, %vq, %{{.*}} add : {{.*}} loc("leaf ['b'][0]"("{{.*}}expand-pytree-copies.cpy":17:3))
