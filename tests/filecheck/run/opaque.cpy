# RUN: copyir run --split-input-file --verify-diagnostics --fill-inputs iota %s
# RUN: copyir lower --kernel softmax %s | filecheck %s --check-prefix=DMA
# RUN: copyir lower --kernel softmax %s | copyir run - --fill-inputs iota 2>&1 | filecheck %s --check-prefix=STREAM
# RUN: copyir run --kernel softmax --trace --fill-inputs iota %s 2>&1 | filecheck %s --check-prefix=TRACE

# Opaque computations run: the DMA protocol is checked on the refs they
# read and write, they write poison, and an output left holding it is a
# warning at the opaque computation that wrote it.

# DMA:      dma.opaque "reduce_max" reads "vmem" 0 [128, 1] f32 [8, 128]
# DMA-NEXT: dma.opaque "reduce_max" writes "smem" 0 [] f32 []
# DMA-NEXT: dma.opaque "exp" reads "vmem" 0 [128, 1] f32 [8, 128]
# DMA-NEXT: dma.opaque "exp" reads "smem" 0 [] f32 []
# DMA-NEXT: dma.opaque "exp" writes "vmem" 4096 [128, 1] f32 [8, 128]
# STREAM:   opaque.cpy:[[# @LINE + 16]]:3: warning: Output y holds poison that opaque computation "exp" wrote: 1024 of its 1024 elements, the first at y[0, 0]
# STREAM:   ran softmax: 2 DMAs
# TRACE:      opaque "reduce_max" reads a[0:8, 0:128]
# TRACE-NEXT: opaque "reduce_max" writes m[]
# TRACE-NEXT: opaque "exp" reads a[0:8, 0:128]
# TRACE-NEXT: opaque "exp" reads m[]
# TRACE-NEXT: opaque "exp" writes b[0:8, 0:128]
# TRACE-NEXT: start b[0:8, 0:128] -> y[0:8, 0:128] on 1

kernel softmax(x: f32[8, 128], y: f32[8, 128]) {
  a = alloc f32[8, 128] @vmem
  b = alloc f32[8, 128] @vmem
  m = alloc f32[] @smem
  sync_copy x -> a
  opaque "reduce_max" (a) -> (m)
  # expected-warning@+1 {{Output y holds poison that opaque computation "exp" wrote: 1024 of its 1024 elements, the first at y[0, 0]}}
  opaque "exp" (a, m) -> (b)
  sync_copy b -> y
}

# -----

# Poison overwritten by real data before the end is no warning.
kernel overwritten(x: f32[8, 128], y: f32[8, 128]) {
  a = alloc f32[8, 128] @vmem
  b = alloc f32[8, 128] @vmem
  sync_copy x -> a
  opaque "exp" (a) -> (b)
  sync_copy b -> y
  b[...] = a + 1.0
  sync_copy b -> y
}

# -----

# A computation over poison makes poison; the warning names the opaque
# computation, in a loop too.
kernel scaled(x: f32[4, 8, 128], y: f32[4, 8, 128]) {
  a = alloc f32[8, 128] @vmem
  b = alloc f32[8, 128] @vmem
  for i in range(4) {
    sync_copy x[i] -> a
    # expected-warning@+1 {{Output y holds poison that opaque computation "tanh" wrote: 3072 of its 4096 elements, the first at y[1, 0, 0]}}
    opaque "tanh" (a) -> (b)
    when i == 0 {
      b[...] = a
    }
    a[...] = 2.0 * b
    sync_copy a -> y[i]
  }
}

# -----

kernel race(x: f32[8, 128], y: f32[8, 128]) {
  a = alloc f32[8, 128] @vmem
  b = alloc f32[8, 128] @vmem
  s = semaphore
  copy_start x -> a, s
  # expected-error@+1 {{Race: this computation reads a[0:8, 0:128] while the DMA started at}}
  opaque "exp" (a) -> (b)
  copy_wait x -> a, s
  sync_copy b -> y
}

# -----

kernel write_race(x: f32[8, 128], y: f32[8, 128]) {
  a = alloc f32[8, 128] @vmem
  s = semaphore
  sync_copy x -> a
  copy_start a -> y, s
  # expected-error@+1 {{Race: this computation writes a[0:8, 0:128] while the DMA started at}}
  opaque "exp" (a) -> (a)
  copy_wait a -> y, s
}

# -----

kernel unwritten(x: f32[8, 128], y: f32[8, 128]) {
  a = alloc f32[8, 128] @vmem
  b = alloc f32[8, 128] @vmem
  sync_copy x[0:4] -> a[0:4]
  # expected-error@+1 {{Computation reads a[0:8, 0:128], which nobody wrote (first unwritten: a[4, 0])}}
  opaque "exp" (a) -> (b)
  sync_copy b -> y
}
