# RUN: copyir verify --protocol --split-input-file --verify-diagnostics %s
# RUN: copyir run --fill-inputs iota --split-input-file --verify-diagnostics %s

# Broken claims of a parallel loop (backends/parallel.py): the same error,
# at the later access with the other iteration's site as a note, from the
# data-free check and in every completion mode.

# Two iterations write one HBM element.
kernel k(x: i32[4, 8] @hbm, y: i32[4, 8] @hbm) {
  for i, j in grid(4, 2), parallel=(0,) {
    # expected-error@+2 {{Parallel loop i: this DMA writes y[0:1, 0:8], which iteration i = 0, j = 0 writes too; two iterations of a parallel loop never write the same HBM element, at i = 1, j = 0}}
    # expected-note@+1 {{iteration i = 0, j = 0 writes it here}}
    sync_copy x[i] -> y[0]
  }
}

# -----

# State carried in VMEM from one iteration to the next.
kernel k(x: i32[4, 8] @hbm, y: i32[4, 8] @hbm) {
  buf = alloc i32[8] @vmem
  sync_copy x[0] -> buf
  for i in range(4), parallel=(0,) {
    # expected-error@+1 {{Parallel loop i: this DMA reads buf[0:8], which iteration i = 0 writes; an iteration of a parallel loop reads only what it wrote itself or what was there before the loop, at i = 1}}
    sync_copy buf -> y[i]
    # expected-note@+1 {{iteration i = 0 writes it here}}
    sync_copy x[i] -> buf
  }
}

# -----

# A DMA started in one iteration and waited in another.
kernel k(x: i32[4, 8] @hbm, y: i32[4, 8] @hbm) {
  s = semaphore
  for i in range(4), parallel=(0,) {
    when i == 0 {
      # expected-note@+1 {{the DMA started here}}
      copy_start x[0] -> y[0], s
    }
    when i == 3 {
      # expected-error@+1 {{Parallel loop i: this wait finishes the DMA started in iteration i = 0; a DMA is started and finished within one iteration of a parallel loop, at i = 3}}
      copy_wait x[0] -> y[0], s
    }
  }
}

# -----

# Scratch that every iteration writes, read after the loop.
kernel k(x: i32[4, 8] @hbm, y: i32[4, 8] @hbm) {
  buf = alloc i32[8] @vmem
  for i in range(4), parallel=(0,) {
    # expected-note@+2 {{iteration i = 0 writes it here}}
    # expected-note@+1 {{iteration i = 1 writes it here}}
    sync_copy x[i] -> buf
  }
  # expected-error@+1 {{Parallel loop i: this DMA reads buf[0:8], whose element buf[0] iterations i = 0 and i = 1 both write; after the loop it holds what the one that ran last wrote}}
  sync_copy buf -> y[0]
}
