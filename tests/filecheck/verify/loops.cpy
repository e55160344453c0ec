# RUN: copyir verify --split-input-file --verify-diagnostics %s
# RUN: not copyir verify --split-input-file %s 2>&1 | filecheck %s --check-prefix=NOTE

# Errors of the authoring syntax of loops, conditions, index expressions,
# descriptors, asynchronous window copies and computations: each part
# states the exact message and the line it points at.

# Index expressions are affine: // and % divide by a constant.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i, j in grid(4, 2) {
    # expected-error@+1 {{Index expression i // j is not affine: it divides by an index value}}
    copy_start x[ds(8 * (i // j), 8)] -> acc, s
  }
}

# -----

# ... a positive one.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(4) {
    # expected-error@+1 {{Index expression i % 0 divides by 0: // and % take a positive constant}}
    copy_start x[ds(i % 0, 8)] -> acc, s
  }
}

# -----

# `/` is for computations on floats.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(4) {
    # expected-error@+1 {{Index expression i / 2 uses / (write // to divide integers); index expressions take integers, index values and + - * // %}}
    copy_start x[ds(i / 2, 8)] -> acc, s
  }
}

# -----

# An index is an integer.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{Index expression 1.5 uses the float 1.5; index expressions take integers, index values and + - * // %}}
  copy_start x[1.5] -> acc[0], s
}

# -----

# A ref is no index value.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{acc is f32[8, 128] @vmem, not an index value}}
  copy_start x[acc] -> acc[0], s
}

# -----

# A view is no index value either (no data-dependent indices).
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{Index expression acc[0, 0] uses a view; index expressions take integers, index values and + - * // %}}
  copy_start x[acc[0, 0]] -> acc[0], s
}

# -----

# ds(start, size) is a subscript of its own.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{ds(start, size) slices one dimension and is written as a subscript, x[ds(start, size)], not in ds(0, 8)}}
  copy_start x[ds(0, 8) + 1] -> acc, s
}

# -----

# ds takes two arguments.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{ds takes a start and a static size, ds(start, size), got ds(0)}}
  copy_start x[ds(0)] -> acc, s
}

# -----

# ... and its size is static.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(8) {
    # expected-error@+1 {{The size of ds(0, i) must be a static integer, got i}}
    copy_start x[ds(0, i)] -> acc, s
  }
}

# -----

# So is the size of a slice.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(8) {
    # expected-error@+1 {{Slice 8 * i:8 * i + i of x[8 * i:8 * i + i] must have a static size, but its stop minus its start is i}}
    copy_start x[8 * i:8 * i + i] -> acc, s
  }
}

# -----

# A loop runs over range or grid.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{A loop runs over range(stop), range(start, stop) or grid(n, ...), not rnage(8)}}
  for i in rnage(8) {
  }
}

# -----

# ... with static bounds.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(8) {
    # expected-error@+1 {{A bound of range(i) must be a static integer, got i}}
    for j in range(i) {
    }
  }
}

# -----

# One index per dimension.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{grid(8, 2) gives 2 index(es) per iteration, but the loop names 1}}
  for i in grid(8, 2) {
  }
}

# -----

# A loop index is not rebound...
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(8) {
    # expected-error@+1 {{i is the index of the loop at line 199 and cannot be rebound}}
    i = 2 * i
  }
}

# -----

# ... nor reused by a nested loop.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(8) {
    # expected-error@+1 {{i is the index of the loop at line 214 and cannot be rebound}}
    for i in range(2) {
    }
  }
}

# -----

# So does a name defined in a body.
# NOTE: note: t was defined at line 233 inside the body of the when at line 232, and exists only inside that body
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(8) {
    when i > 0 {
      t = 8 * i
    }
    # expected-error@+1 {{t is not defined}}
    copy_start x[ds(t, 8)] -> acc, s
  }
}

# -----

# A condition has at most 256 terms as an or of ands.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(8) {
    # expected-error@+1 {{Condition i != 0 and i != 1 and i != 2 and i != 3 and i != 4 and i != 5 and i != 6 and i != 7 and i != 8 has more than 256 terms once written as an or of ands}}
    when i != 0 and i != 1 and i != 2 and i != 3 and i != 4 and i != 5 and i != 6 and i != 7 and i != 8 {
    }
  }
}

# -----

# start and wait are a descriptor's methods.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{acc.start() needs a copy descriptor (c = async_copy src -> dst, sem), but acc is f32[8, 128] @vmem}}
  acc.start()
}

# -----

# A definition names a name.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{async_copy defines a name: write name = async_copy ..., not buf[0] = ...}}
  buf[0] = async_copy x[0:8] -> acc, s
}

# -----

# An asynchronous window copy names its semaphore.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{buffered_copy start needs a semaphore after its destination: buffered_copy start src -> dst, sem, slot=s}}
  buffered_copy start x -> bx[0, 0], slot=1
}

# -----

# ... one semaphore.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{buffered_copy takes one semaphore after its destination (and only when it starts or waits), then options; sems[1] is not one}}
  buffered_copy start x -> bx[0, 0], sems[0], sems[1]
}

# -----

# Computations have + - * / max min and unary minus.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{Computations take + - * /, max, min and unary minus, not //: acc // 2}}
  acc[...] = acc // 2
}

# -----

# ... max and min of two.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  # expected-error@+1 {{max takes 2 arguments, got 3: max(acc, 1.0, 2.0)}}
  acc[...] = max(acc, 1.0, 2.0)
}

# -----

# ... over refs and literals.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  sems = semaphore[2]
  s = semaphore
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(8) {
    # expected-error@+1 {{i is an index value; a computation takes refs, views and numeric literals}}
    acc += i
  }
}

# -----

# `-` on bool is refused, as numpy and JAX refuse it.
kernel k(x: f32[8] @hbm) {
  a = alloc bool[8] @vmem
  b = alloc bool[8] @vmem
  # expected-error@+1 {{- is not defined on bool: numpy and JAX refuse to negate or subtract booleans}}
  a[...] = a - b
}

# -----

# A bool literal is 0 or 1.
kernel k(x: f32[8] @hbm) {
  a = alloc bool[8] @vmem
  # expected-error@+1 {{Literal 2 does not fit the destination's bool}}
  a[...] = 2
}

# -----

# A float literal that overflows the destination's dtype.
kernel k(x: f32[8] @hbm) {
  h = alloc f16[8] @vmem
  # expected-error@+1 {{Literal 1e6 does not fit the destination's f16}}
  h[...] = 1e6
}

# -----

# A buffer is made once per kernel: not under a kernel-level `when` either.
kernel k(x: i32[8] @hbm, y: i32[8] @hbm) {
  when 0 == 0 {
    # expected-error@+1 {{copy.alloc makes a buffer or a semaphore once per kernel: it must be at the top level of the kernel, not inside a loop or a when}}
    buf = alloc i32[8] @vmem
  }
}

# -----

# A flat chain of `+` is one level of nesting, up to 256 terms.
kernel k(x: i32[8] @hbm, y: i32[8] @hbm) {
  for i in range(1) {
    # expected-error@+1 {{Index expression has 257 terms, more than the limit of 256}}
    t = i % 2 + i % 3 + i % 4 + i % 5 + i % 6 + i % 7 + i % 8 + i % 9 + i % 10 + i % 11 + i % 12 + i % 13 + i % 14 + i % 15 + i % 16 + i % 17 + i % 18 + i % 19 + i % 20 + i % 21 + i % 22 + i % 23 + i % 24 + i % 25 + i % 26 + i % 27 + i % 28 + i % 29 + i % 30 + i % 31 + i % 32 + i % 33 + i % 34 + i % 35 + i % 36 + i % 37 + i % 38 + i % 39 + i % 40 + i % 41 + i % 42 + i % 43 + i % 44 + i % 45 + i % 46 + i % 47 + i % 48 + i % 49 + i % 50 + i % 51 + i % 52 + i % 53 + i % 54 + i % 55 + i % 56 + i % 57 + i % 58 + i % 59 + i % 60 + i % 61 + i % 62 + i % 63 + i % 64 + i % 65 + i % 66 + i % 67 + i % 68 + i % 69 + i % 70 + i % 71 + i % 72 + i % 73 + i % 74 + i % 75 + i % 76 + i % 77 + i % 78 + i % 79 + i % 80 + i % 81 + i % 82 + i % 83 + i % 84 + i % 85 + i % 86 + i % 87 + i % 88 + i % 89 + i % 90 + i % 91 + i % 92 + i % 93 + i % 94 + i % 95 + i % 96 + i % 97 + i % 98 + i % 99 + i % 100 + i % 101 + i % 102 + i % 103 + i % 104 + i % 105 + i % 106 + i % 107 + i % 108 + i % 109 + i % 110 + i % 111 + i % 112 + i % 113 + i % 114 + i % 115 + i % 116 + i % 117 + i % 118 + i % 119 + i % 120 + i % 121 + i % 122 + i % 123 + i % 124 + i % 125 + i % 126 + i % 127 + i % 128 + i % 129 + i % 130 + i % 131 + i % 132 + i % 133 + i % 134 + i % 135 + i % 136 + i % 137 + i % 138 + i % 139 + i % 140 + i % 141 + i % 142 + i % 143 + i % 144 + i % 145 + i % 146 + i % 147 + i % 148 + i % 149 + i % 150 + i % 151 + i % 152 + i % 153 + i % 154 + i % 155 + i % 156 + i % 157 + i % 158 + i % 159 + i % 160 + i % 161 + i % 162 + i % 163 + i % 164 + i % 165 + i % 166 + i % 167 + i % 168 + i % 169 + i % 170 + i % 171 + i % 172 + i % 173 + i % 174 + i % 175 + i % 176 + i % 177 + i % 178 + i % 179 + i % 180 + i % 181 + i % 182 + i % 183 + i % 184 + i % 185 + i % 186 + i % 187 + i % 188 + i % 189 + i % 190 + i % 191 + i % 192 + i % 193 + i % 194 + i % 195 + i % 196 + i % 197 + i % 198 + i % 199 + i % 200 + i % 201 + i % 202 + i % 203 + i % 204 + i % 205 + i % 206 + i % 207 + i % 208 + i % 209 + i % 210 + i % 211 + i % 212 + i % 213 + i % 214 + i % 215 + i % 216 + i % 217 + i % 218 + i % 219 + i % 220 + i % 221 + i % 222 + i % 223 + i % 224 + i % 225 + i % 226 + i % 227 + i % 228 + i % 229 + i % 230 + i % 231 + i % 232 + i % 233 + i % 234 + i % 235 + i % 236 + i % 237 + i % 238 + i % 239 + i % 240 + i % 241 + i % 242 + i % 243 + i % 244 + i % 245 + i % 246 + i % 247 + i % 248 + i % 249 + i % 250 + i % 251 + i % 252 + i % 253 + i % 254 + i % 255 + i % 256 + i % 257 + i % 258
  }
}

# -----

# A loop from a large negative start: the index's values, not 0 to the trip
# count, bound its arithmetic (the run would refuse it).
kernel k(x: f32[8] @hbm, y: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  for i in range(-4611686018427387904, -4611686018427387896) {
    # expected-error@+1 {{The index arithmetic of x[ds(i % 8, 1)] reaches the limit of 2305843009213693952 on a run's addresses over the loops' ranges}}
    copy_start x[ds(i % 8, 1)] -> buf[ds(i % 8, 1)], s
    copy_wait x[ds(i % 8, 1)] -> buf[ds(i % 8, 1)], s
  }
}

# -----

# An invalidation's and a window slot's arithmetic is bounded too.
kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  for i in range(8) {
    # expected-error@+1 {{The index arithmetic of buf[ds((i + 4611686018427387904) % 8, 1)] reaches the limit of 2305843009213693952 on a run's addresses over the loops' ranges}}
    invalidate buf[ds((i + 4611686018427387904) % 8, 1)]
  }
}

# -----

kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  x_window = buffered_ref f32[64, 128], block=(8, 128), buffers=2
  for i in range(8) {
    # expected-error@+1 {{The index arithmetic of x_window reaches the limit of 2305843009213693952 on a run's addresses over the loops' ranges}}
    xw = window x_window[(i + 4611686018427387904) % 2]
  }
}

# -----

# A parallel dimension is a dimension of the grid.
kernel k(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  # expected-error@+1 {{Malformed loop: a parallel dimension out of range}}
  for i, j in grid(4, 2), parallel=(2,) {
    sync_copy x -> y
  }
}
