# A name is defined once in a kernel.

kernel defined_twice(x: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  # expected-error@+1 {{buf is defined twice (first at line 4)}}
  buf = alloc f32[8, 128] @smem
}
