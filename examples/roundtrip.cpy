# Copy a pytree of HBM arrays into VMEM and back out with sync_copy.
#
# Each sync_copy lowers to one semaphore, a DMA start per leaf in leaf
# order, then a wait per leaf in the same order (the Pallas helper's order).
# Records are flattened by sorted key, as JAX does.

kernel roundtrip(a: f32[16, 128] @hbm, b: i32[8, 256] @hbm,
                 out_a: f32[16, 128] @hbm, out_b: i32[8, 256] @hbm) {
  va = alloc f32[16, 128] @vmem
  vb = alloc i32[8, 256] @vmem
  sync_copy (a, b) -> (va, vb)
  sync_copy {x: va, y: vb} -> {x: out_a, y: out_b}
}
