# A syntax error is a located diagnostic too.

kernel syntax_error(x: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  # expected-error@+1 {{unexpected end of line; expected ','}}
  copy_start x -> buf
}
