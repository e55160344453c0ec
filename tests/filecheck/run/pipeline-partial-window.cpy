# RUN: copyir run --split-input-file --verify-diagnostics --fill-inputs iota %s
# RUN: copyir run --kernel partial --fill-inputs iota --mode eager --output %t.npz %s 2>&1 | filecheck %s --check-prefix=WARN
# RUN: python -c "import sys, numpy as np; y = np.load(sys.argv[1])['y']; print(y[::4, 0].tolist()); print(np.array_equal(y[20:24], y[4:8]), np.array_equal(y[28:32], y[12:16]))" %t.npz | filecheck %s --check-prefix=DATA
# RUN: copyir run --kernel partial --fill-inputs iota --mode on_wait --output %t2.npz %s 2>&1 | filecheck %s --check-prefix=WARN
# RUN: cmp %t.npz %t2.npz
# RUN: copyir run --kernel half --fill-inputs iota --output %t3.npz %s 2>&1 | filecheck %s --check-prefix=HALF
# RUN: python -c "import sys, numpy as np; y = np.load(sys.argv[1])['y'].reshape(4, 8, 128); print([hex(v) for v in np.unique(y[:, 4:].view(np.uint32))]); print(np.array_equal(y[:, :4], 2 * np.arange(4096, dtype=np.float32).reshape(4, 8, 128)[:, :4]))" %t3.npz | filecheck %s --check-prefix=NAN

# A pipeline body that writes its output window whole at blocks 0 and 1,
# then only rows 0:4: the whole window goes back (as Pallas'), so block
# 2's rows 4:8 carry block 0's (slot 0 held it) and block 3's block 1's;
# at no block do rows 4:8 stay unwritten, but the first write-back of a
# half-written window is warned about, once.

# WARN: pipeline-partial-window.cpy:[[# @LINE + 13]]:3: warning: DMA writes y[16:24, 0:128] from window memory the pipeline body did not write (the first at y[20, 0]): as Pallas writes a whole window back, it holds what the window's slot held before, at block (i, 0) slot i % 2, at i = 2
# WARN-NOT: warning

# Rows 0, 4, 8, ...: x + 1 in each block's first half; block 2's second
# half holds x[4] (block 0's), block 3's x[12] (block 1's).
# DATA: [1.0, 512.0, 1025.0, 1536.0, 2049.0, 512.0, 3073.0, 1536.0]
# DATA: True True
# HALF: warning: DMA writes y[0:8, 0:128] from window memory the pipeline body did not write (the first at y[4, 0])
# NAN: ['0x7fc00000']
# NAN: True

kernel partial(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  # expected-warning@+1 {{DMA writes y[16:24, 0:128] from window memory the pipeline body did not write (the first at y[20, 0]): as Pallas writes a whole window back, it holds what the window's slot held before, at block (i, 0) slot i % 2, at i = 2}}
  pipeline grid=(4,)
      in  x block=(8, 128) index=(i) -> (i, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw, i) {
    when i <= 1 {
      yw[...] = xw
    }
    yw[0:4, :] = xw[0:4, :] + 1.0
  }
}

# -----

# Never written, rows 4:8 of every block carry the uninitialized value
# (NaN) the window's slots start with.

kernel half(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  # expected-warning@+1 {{DMA writes y[0:8, 0:128] from window memory the pipeline body did not write (the first at y[4, 0]): as Pallas writes a whole window back, it holds what the window's slot held before, at block (i, 0) slot i % 2, at i = 0}}
  pipeline grid=(4,)
      in  x block=(8, 128) index=(i) -> (i, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[0:4, :] = xw[0:4, :] * 2.0
  }
}

# -----

# The body itself reading what it did not write stays an error.

kernel reads_first(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  pipeline grid=(4,)
      in  x block=(8, 128) index=(i) -> (i, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[0:4, :] = xw[0:4, :]
    # expected-error@+1 {{Computation reads y_window[0:1, 0:8, 0:128], which nobody wrote (first unwritten: y_window[0, 4, 0]), at i = 0}}
    yw += xw
  }
}
