# alloc makes VMEM or SMEM scratch; HBM arrays are kernel parameters.

kernel alloc_in_hbm(x: f32[8, 128] @hbm) {
  # expected-error@+1 {{alloc buf must be in vmem or smem, got f32[8, 128] @hbm}}
  buf = alloc f32[8, 128] @hbm
}
