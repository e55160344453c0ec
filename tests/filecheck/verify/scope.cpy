# RUN: copyir verify --split-input-file --verify-diagnostics %s
# RUN: not copyir verify --split-input-file %s 2>&1 | filecheck %s

# Where a scope's allocs and semaphores may stand, and how long its names
# live.

# An alloc in a loop inside a scope is not directly in the scope.
kernel k(x: f32[8, 128] @hbm) {
  scope {
    for i in range(2) {
      # expected-error@+1 {{copy.alloc makes a buffer or a semaphore once per kernel: it must be at the top level of the kernel, not inside a loop or a when}}
      buf = alloc f32[8, 128] @vmem
    }
  }
}
# CHECK: note: an alloc or a semaphore directly in a scope { ... } is made afresh on every entry into it

# -----

# A BufferedRef stays at the kernel's top level.
kernel k(x: f32[256, 128] @hbm) {
  scope {
    # expected-error@+1 {{copy.buffered_ref makes a buffer or a semaphore once per kernel: it must be at the top level of the kernel, not inside a loop or a when}}
    bx = buffered_ref x, block=(128, 128)
  }
}

# -----

# A scope's names end with it.
kernel k(x: f32[8, 128] @hbm) {
  scope {
    buf = alloc f32[8, 128] @vmem
    s = semaphore
  }
  # expected-error@+1 {{buf is not defined}}
  copy_start x -> buf, s
}
# CHECK: note: buf was defined at line 33 inside the body of the scope at line 32, and exists only inside that body

# -----

# A scope's buffer is checked against its space like any other.
kernel k(x: f32[8, 128] @hbm) {
  scope {
    # expected-error@+1 {{big needs 268435456 bytes of vmem, more than its capacity of 134217728 bytes in target default}}
    big = alloc f32[65536, 1024] @vmem
  }
}
