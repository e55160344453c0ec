# RUN: copyir verify --emit cpy %s | filecheck %s
# RUN: copyir verify --emit mlir %s | copyir verify --input-format mlir --emit cpy - | filecheck %s
# RUN: copyir verify --emit cpy --debuginfo %s | copyir verify --emit cpy - | filecheck %s

# Pipelines print back one spec per line, except for the spellings the
# printer normalises (shown in the comments), and survive a trip through
# the MLIR form.

# CHECK:      kernel pipelines(x: f32[64, 256] @hbm, y: f32[64, 256] @hbm, r: f32[40, 128] @hbm, z: f32[4, 8, 128] @hbm) {
kernel pipelines(x: f32[64, 256] @hbm, y: f32[64, 256] @hbm, r: f32[40, 128] @hbm, z: f32[4, 8, 128] @hbm) {
  # CHECK-NEXT:   acc = alloc f32[8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  # One line is one spec per line; `in` is padded to `out`'s width; the
  # default buffer count, 2, is left out.
  # CHECK-NEXT:   pipeline grid=(8, 2)
  # CHECK-NEXT:       in  x block=(8, 128) index=(i, j) -> (i, j) buffers=3
  # CHECK-NEXT:       out y block=(8, 128) index=(i, j) -> (i, j)
  # CHECK-NEXT:       (xw, yw) {
  pipeline grid=(8, 2) in x block=(8, 128) index=(i, j) -> (i, j) buffers=3 out y block=(8, 128) index=(a, b) -> (a, b) buffers=2 (xw, yw) {
    # CHECK-NEXT:     yw[...] = 2.0 * xw + 1.0
    yw[...] = 2.0 * xw + 1.0
  # CHECK-NEXT:   }
  }
  # Named grid indices name the index maps' parameters too; constants
  # fold; 1 - j is written -j + 1.
  # CHECK-NEXT:   pipeline grid=(8, 2) dimension_semantics=(parallel, arbitrary)
  # CHECK-NEXT:       in  x block=(8, 128) index=(p, q) -> (p, q)
  # CHECK-NEXT:       out y block=(8, 128) index=(p, q) -> (p, -q + 1)
  # CHECK-NEXT:       (xw, yw, p, q) {
  pipeline grid=(2 * 4, 2)
      dimension_semantics=(parallel, arbitrary)
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (i, 1 - j)
      (xw, yw, p, q) {
    # CHECK-NEXT:     when q == 0 {
    when q == 0 {
      # CHECK-NEXT:       acc[...] = xw
      acc[...] = xw
    # CHECK-NEXT:     }
    }
    # CHECK-NEXT:     yw[...] = acc
    yw[...] = acc
  # CHECK-NEXT:   }
  }
  # `grid=4` is `grid=(4,)`, `index=i -> ...` is `index=(i) -> ...`;
  # Element and squeezed dims.
  # CHECK-NEXT:   pipeline grid=(4,) no_pipelining
  # CHECK-NEXT:       in  r block=(Element(16), 128) index=(i) -> (8 * i, 0) buffers=1
  # CHECK-NEXT:       out z block=(None, 8, 128) index=(i) -> (i, 0, 0) buffers=1
  # CHECK-NEXT:       (rw, zw) {
  pipeline grid=4 no_pipelining
      in r block=(Element(16), 128) index=i -> (8 * i, 0) buffers=1
      out z block=(None, 8, 128) index=i -> (i, 0, 0) buffers=1
      (rw, zw) {
    # CHECK-NEXT:     zw[...] = rw[0:8] + rw[8:16]
    zw[...] = rw[0:8] + rw[8:16]
  # CHECK-NEXT:   }
  }
  # An empty body; an index map that ignores a grid dimension; without
  # outputs `in` takes no padding.
  # CHECK-NEXT:   pipeline grid=(8, 2) dimension_semantics=(arbitrary, arbitrary)
  # CHECK-NEXT:       in x block=(8, 256) index=(i, j) -> (i, 0)
  # CHECK-NEXT:       (xw) {
  # CHECK-NEXT:   }
  pipeline grid=(8, 2) dimension_semantics=(arbitrary, arbitrary)
      in x block=(8, 256) index=(i, j) -> (i, 0)
      (xw) {
  }
  # JAX 0.12's attributes: cores, lookahead, an inout's (in, out) counts
  # (a bare count n is Pallas' (n, 1): `_normalize_buffer_count`), and
  # the kernel grid's flavour.
  # CHECK-NEXT:   pipeline grid=(8, 2) dimension_semantics=(parallel, arbitrary) cores=3
  # CHECK-NEXT:       in    x block=(8, 128) index=(i, j) -> (i, j) buffers=3 lookahead
  # CHECK-NEXT:       inout y block=(8, 128) index=(i, j) -> (i, j) buffers=(3, 1)
  # CHECK-NEXT:       (xw, yw) {
  pipeline grid=(8, 2) dimension_semantics=(parallel, arbitrary) cores=3
      in    x block=(8, 128) index=(i, j) -> (i, j) buffers=3 lookahead
      inout y block=(8, 128) index=(i, j) -> (i, j) buffers=3
      (xw, yw) {
  # CHECK-NEXT:   }
  }
  # CHECK-NEXT:   pipeline grid=(8, 2)
  # CHECK-NEXT:       in    x block=(8, 128) index=(i, j) -> (i, j)
  # CHECK-NEXT:       inout y block=(8, 128) index=(i, j) -> (i, j) buffers=(2, 4)
  # CHECK-NEXT:       (xw, yw) {
  pipeline grid=(8, 2)
      in    x block=(8, 128) index=(i, j) -> (i, j)
      inout y block=(8, 128) index=(i, j) -> (i, j) buffers=(2, 4)
      (xw, yw) {
  }
  # CHECK-NEXT:   }
  # CHECK-NEXT:   pipeline kernel_grid grid=(8, 2) dimension_semantics=(parallel, arbitrary)
  # CHECK-NEXT:       in  x block=(8, 128) index=(i, j) -> (i, j)
  # CHECK-NEXT:       out y block=(8, 128) index=(i, j) -> (i, j)
  # CHECK-NEXT:       (xw, yw) {
  pipeline kernel_grid grid=(8, 2) dimension_semantics=(parallel, arbitrary)
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (i, j)
      (xw, yw) {
  }
# CHECK-NEXT: }
}
