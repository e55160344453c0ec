# A computation writes VMEM and SMEM only: compute in VMEM, then copy the
# result out (Pallas' message, verbatim).

kernel compute_hbm_store(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  # expected-error@+1 {{Loads and stores are only allowed on VMEM and SMEM references.}}
  y[...] = 2.0
}
