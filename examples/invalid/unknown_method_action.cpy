# A descriptor's method is its action, exactly `start` or `wait` as every
# action copyir names (Pallas' message, verbatim).

kernel unknown_method_action(x: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  c = async_copy x -> buf, s
  # expected-error@+1 {{Unknown action: Start}}
  c.Start()
  c.wait()
}
