# Every name must be defined before it is used.

kernel undefined_name(x: f32[8, 128] @hbm) {
  s = semaphore
  # expected-error@+1 {{buf is not defined}}
  copy_start x -> buf, s
}
