# Each statement takes its own options: copy_start takes add and priority.

kernel unknown_option(x: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  # expected-error@+1 {{Unknown option slot for copy_start (expected add or priority)}}
  copy_start x -> buf, s, slot=1
}
