# Kernel parameters live in HBM; scratch comes from alloc.

kernel param_not_hbm(x: f32[8, 128] @hbm,
                     # expected-error@+1 {{Kernel parameter y must be in hbm, got f32[8, 128] @vmem}}
                     y: f32[8, 128] @vmem) {
  sync_copy x -> y
}
