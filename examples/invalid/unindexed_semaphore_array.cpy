# A semaphore array must be indexed to give one semaphore.

kernel unindexed_semaphore_array(x: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  sems = semaphore[2]
  # expected-error@+1 {{copy_start expects a semaphore as sem, but sems is an array semaphore[2]; index it}}
  copy_start x -> buf, sems
}
