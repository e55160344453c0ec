# A DMA never waited: at the end it is still in flight, and its semaphore
# would end at 4096 bytes instead of zero.

kernel never_waited(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  s = semaphore
  # expected-error@+2 {{The program ends with 1 DMA(s) in flight: never waited, or waited for fewer bytes than they move}}
  # expected-note@+1 {{DMA of 4096 bytes on semaphore s started here}}
  copy_start x -> y, s
}
