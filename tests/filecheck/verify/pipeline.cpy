# RUN: copyir verify --split-input-file --verify-diagnostics %s
# RUN: not copyir verify --split-input-file %s 2>&1 | filecheck %s --check-prefix=NOTE

# Errors of pipelines: each part states the exact message and the line it
# points at. The verifier's errors point at the pipeline; the syntax's at
# the spec, name or expression they are about (a comment line inside a
# pipeline's header is fine: its newlines do not end it).

# An input has at least one.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  # expected-error@+1 {{buffers must be >= 1, got 0}}
  pipeline grid=(4,)
      in  x block=(8, 256) index=(i) -> (i, 0) buffers=0
      out y block=(8, 256) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# An output block shared across a parallel dimension.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  # expected-error@+1 {{Output 0 (y) visits block (0, 0) in iterations (0, 0) and (1, 0), which differ in parallel dimension 0: iterations of a parallel dimension run on different cores and must not share an output block}}
  pipeline kernel_grid grid=(2, 2) dimension_semantics=(parallel, arbitrary)
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (0, j)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# An index map gives a block index per array dimension.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  # expected-error@+1 {{The index map of y, (d0) -> (d0), must take the grid's 1 indices to 2 block indices}}
  pipeline grid=(4,)
      in  x block=(8, 256) index=(i) -> (i, 0)
      out y block=(8, 256) index=(i) -> (i)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# ... and takes a name per grid dimension.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4, 2)
      in  x block=(8, 128) index=(i, j) -> (i, j)
      # expected-error@+1 {{The index map of y takes 1 parameter(s), but the grid has 2 dimension(s): it takes one grid index per dimension}}
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# Its expressions are affine.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4, 2)
      # expected-error@+1 {{Index expression i * j is not affine: it multiplies two index values}}
      in  x block=(8, 128) index=(i, j) -> (i * j, 0)
      out y block=(8, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# ... and name its own parameters only.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4,)
      # NOTE: note: an index map's expressions name its own parameters only, (i); name the body's grid indices after the windows to use them in the body
      # expected-error@+1 {{y is not defined}}
      in  x block=(8, 256) index=(i) -> (y, 0)
      out y block=(8, 256) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# A spec names a ref of the kernel.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4,)
      # expected-error@+1 {{z is not defined}}
      in  z block=(8, 256) index=(i) -> (i, 0)
      out y block=(8, 256) index=(i) -> (i, 0)
      (zw, yw) {
    yw[...] = zw
  }
}

# -----

# It gives a block and an index map.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4,)
      # expected-error@+1 {{Option index of in x is required}}
      in  x block=(8, 256)
      out y block=(8, 256) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# The body names a window per operand, then all grid indices or none.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4, 2)
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (i, j)
      # expected-error@+1 {{The pipeline's body names 3 value(s): its 2 window(s), one per operand in spec order, then optionally its 2 grid index(es), all of them or none}}
      (xw, yw, i) {
    yw[...] = xw
  }
}

# -----

# A window's name is new.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4,)
      in  x block=(8, 256) index=(i) -> (i, 0)
      out y block=(8, 256) index=(i) -> (i, 0)
      # expected-error@+1 {{x is defined twice (first at line 128)}}
      (x, yw) {
    yw[...] = x
  }
}

# -----

# A grid index is not rebound.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4,)
      in  x block=(8, 256) index=(i) -> (i, 0)
      out y block=(8, 256) index=(i) -> (i, 0)
      (xw, yw, i) {
    # expected-error@+1 {{i is the index of the pipeline at line 142 and cannot be rebound}}
    i = alloc f32[8] @vmem
    yw[...] = xw
  }
}

# -----

# Windows exist inside the body only.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4,)
      in  x block=(8, 256) index=(i) -> (i, 0)
      out y block=(8, 256) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
  # NOTE: note: xw was defined at line 159 inside the body of the pipeline at line 156, and exists only inside that body
  # expected-error@+1 {{xw is not defined}}
  sync_copy xw -> y
}

# -----

# Dimension semantics are Pallas' words.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  # expected-error@+1 {{A dimension's semantics is parallel or arbitrary, not paralel}}
  pipeline grid=(4, 2) dimension_semantics=(paralel, arbitrary)
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# A body does not write an input window: later steps would read the
# writes or not, as the block changes.
kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4,)
      in  x block=(8, 256) index=(i) -> (i, 0)
      out y block=(8, 256) index=(i) -> (i, 0)
      (xw, yw) {
    # expected-error@+1 {{The pipeline's body writes xw, in the window of input x: an input block is fetched again only when it changes, so later steps may read these writes instead of x}}
    xw[...] = 2.0 * xw
    yw[...] = xw
  }
}

# -----

# A block that changes every other step is refused with the steps it
# changes at (the message once read `limits.iterations`).
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{The index map of x changes its block irregularly over the grid: copyir keeps a pipeline's schedule as loops and needs block changes that an affine condition describes (it changes at iterations (0,), (2,), (4,), (6,), ...)}}
  pipeline grid=(8,)
      in  x block=(8, 128) index=(i) -> (i // 2, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# Lookahead with one buffer: Pallas' walk never fetches the first block
# (interpret mode hangs); copyir refuses it.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{Lookahead with 1 buffer is not supported yet}}
  pipeline grid=(8,)
      in  x block=(8, 128) index=(i) -> (i, 0) buffers=1 lookahead
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# With none, the count is what is wrong.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{buffers must be >= 1, got 0}}
  pipeline grid=(8,)
      in  x block=(8, 128) index=(i) -> (i, 0) buffers=0 lookahead
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# An inout operand takes an (in, out) pair of buffer counts.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  pipeline grid=(8,)
      in    x block=(8, 128) index=(i) -> (i, 0)
      # expected-error@+1 {{An inout operand takes buffers [in, out]: two counts}}
      inout y block=(8, 128) index=(i) -> (i, 0) buffers=(2, 1, 1)
      (xw, yw) {
    yw += xw
  }
}

# -----

# Each of an inout's counts is at least 1.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{buffers must be >= 1, got 0}}
  pipeline grid=(8,)
      in    x block=(8, 128) index=(i) -> (i, 0)
      inout y block=(8, 128) index=(i) -> (i, 0) buffers=(2, 0)
      (xw, yw) {
    yw += xw
  }
}

# -----

# inout operands are emit_pipeline's.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{inout operands are emit_pipeline's (JAX 0.12's BufferedRef.input_output); a kernel grid has inputs and outputs}}
  pipeline kernel_grid grid=(8,)
      in    x block=(8, 128) index=(i) -> (i, 0)
      inout y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw += xw
  }
}

# -----

# cores= is emit_pipeline's.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{cores= partitions an emit_pipeline over cores; a kernel grid's parallel dimensions are split across cores by the chip (drop kernel_grid or cores=)}}
  pipeline kernel_grid grid=(8,) dimension_semantics=(parallel,) cores=2
      in  x block=(8, 128) index=(i) -> (i, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}

# -----

# A bounded slice has 1 to its bound elements.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{The slice of BoundedSlice(8) in dimension 0 has 9 elements: a bounded slice has 1 to 8}}
  pipeline grid=(4,)
      in  x block=(BoundedSlice(8), 128) index=(i) -> (ds(8 * i, 9), 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}
