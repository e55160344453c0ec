# sync_copy needs two pytrees of the same structure: a tuple is not a list.

kernel tree_mismatch(a: f32[8] @hbm, b: f32[8] @hbm) {
  va = alloc f32[8] @vmem
  vb = alloc f32[8] @vmem
  # expected-error@+1 {{sync_copy trees differ in structure: (a, b) vs [va, vb]}}
  sync_copy (a, b) -> [va, vb]
}
