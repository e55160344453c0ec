# RUN: copyir verify --split-input-file --verify-diagnostics %s

# An opaque computation holds a computation's rules on where it loads and
# stores, with a computation's messages, at the opaque computation.

kernel k(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  a = alloc f32[8, 128] @vmem
  # expected-error@+1 {{Loads are only allowed on VMEM and SMEM references.}}
  opaque "exp" (x) -> (a)
}

# -----

kernel k(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  a = alloc f32[8, 128] @vmem
  # expected-error@+1 {{Loads and stores are only allowed on VMEM and SMEM references.}}
  opaque "exp" (a) -> (a, y[0:4])
}

# -----

kernel k(x: f32[8, 128] @hbm) {
  a = alloc f32[8, 128] @vmem
  t = alloc i32[8] @smem
  # expected-error@+1 {{Can only load scalars from SMEM}}
  opaque "gather" (a, t) -> (a)
}

# -----

kernel k(x: f32[8, 128] @hbm) {
  a = alloc f32[8, 128] @vmem
  t = alloc i32[8] @smem
  # expected-error@+1 {{Can only store scalars to SMEM}}
  opaque "argmax" (a) -> (t[0:2])
}

# -----

kernel k(x: f32[8, 128] @hbm) {
  a = alloc f32[8, 128] @vmem
  # expected-error@+1 {{Cannot store scalars to VMEM}}
  opaque "reduce_sum" (a) -> (a[0, 0])
}

# -----

kernel k(x: f32[8, 128] @hbm) {
  a = alloc f32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{an opaque computation expects a ref as input, but s is a semaphore}}
  opaque "exp" (a, s) -> (a)
}

# -----

kernel k(x: f32[8, 128] @hbm) {
  a = alloc f32[8, 128] @vmem
  i = 3 + 0
  # expected-error@+1 {{an opaque computation expects a ref as output, but i is index}}
  opaque "exp" (a) -> (i)
}

# -----

kernel k(x: f32[8, 128] @hbm) {
  a = alloc f32[8, 128] @vmem
  # expected-error@+1 {{unexpected 'exp'; expected a string}}
  opaque exp (a) -> (a)
}
