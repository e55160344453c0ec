# A record names each key once.

kernel duplicate_key(a: f32[8] @hbm, b: f32[8] @hbm) {
  va = alloc f32[8] @vmem
  vb = alloc f32[8] @vmem
  # expected-error@+1 {{Key x appears twice in a record}}
  sync_copy {x: a, x: b} -> {x: va, y: vb}
}
