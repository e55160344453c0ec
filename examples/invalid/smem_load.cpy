# SMEM holds scalars: a computation reads one SMEM element at a time
# (Pallas' message, verbatim).

kernel smem_load(x: f32[4] @hbm) {
  sm = alloc f32[4] @smem
  vm = alloc f32[8, 4] @vmem
  sync_copy x -> sm
  # expected-error@+1 {{Can only load scalars from SMEM}}
  vm[0] = sm
}
