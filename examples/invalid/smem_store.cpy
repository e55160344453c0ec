# SMEM holds scalars: a computation writes one SMEM element at a time
# (Pallas' message, verbatim); sm[0] = 1.0 would be one.

kernel smem_store(x: f32[4] @hbm) {
  sm = alloc f32[4] @smem
  # expected-error@+1 {{Can only store scalars to SMEM}}
  sm[...] = 1.0
}
