# A race: the second DMA reads the first one's destination before the wait
# that finishes it. In eager mode it would happen to read the new data; in
# on_wait mode, poison. copyir reports it whatever the mode does.

kernel race_read_in_flight(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  copy_start x -> buf, s
  # expected-error@+1 {{Race: this DMA reads buf[0:8, 0:128] while the DMA started at examples/invalid/run/race_read_in_flight.cpy:8:3 is in flight and writes it}}
  sync_copy buf -> y
  copy_wait x -> buf, s
}
