# A computation reads VMEM and SMEM only: copy HBM into VMEM first
# (Pallas' message, verbatim).

kernel compute_hbm_load(x: f32[8, 128] @hbm) {
  acc = alloc f32[8, 128] @vmem
  acc[...] = 0.0
  # expected-error@+1 {{Loads are only allowed on VMEM and SMEM references.}}
  acc += x
}
