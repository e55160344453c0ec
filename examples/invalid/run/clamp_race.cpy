# A clamp that makes blocks overlap, written back one iteration late: block
# i goes out to y[min(128 * i, 872):...] and is waited only in iteration
# i + 1. The last block (rows 872:1000) overlaps block 6 (rows 768:896),
# whose write is still in flight: a race, found on the piece of the min
# that holds at i = 7.

kernel clamp_race(x: f32[1000, 128] @hbm, y: f32[1000, 128] @hbm) {
  buf = alloc f32[2, 128, 128] @vmem
  ins = semaphore[2]
  outs = semaphore[2]
  for i in range(8) {
    slot = i % 2
    start = min(128 * i, 872)
    copy_start x[ds(start, 128)] -> buf[slot], ins[slot]
    copy_wait x[ds(start, 128)] -> buf[slot], ins[slot]
    # expected-error@+2 {{Race: this DMA writes y[872:1000, 0:128] while the DMA started at examples/invalid/run/clamp_race.cpy:18:5 at i = 6 is in flight and writes it, at i = 7}}
    # expected-note@+1 {{the DMA in flight started here}}
    copy_start buf[slot] -> y[ds(start, 128)], outs[slot]
    when i >= 1 {
      copy_wait buf[1 - slot] -> y[0:128], outs[1 - slot]
    }
  }
  copy_wait buf[1] -> y[0:128], outs[1]
}
