# RUN: not copyir verify --split-input-file %s 2>&1 | filecheck %s

# A hint or a did-you-mean is a note after the error, whose message stays
# exactly the documented one.

# CHECK:      hints.cpy:[[# @LINE + 3]]:3: error: unexpected '//'
# CHECK:      note: comments start with # in copyir, not //
kernel comment(x: f32[8]) {
  // a C comment
}

# -----
# CHECK:      hints.cpy:[[# @LINE + 5]]:19: error: buf is not defined
# CHECK:      note: did you mean bufs?
kernel undefined(x: f32[8]) {
  bufs = alloc f32[8] @vmem
  s = semaphore
  copy_start x -> buf, s
}

# -----
# CHECK:      hints.cpy:[[# @LINE + 4]]:14: error: unexpected 'x'; expected '.', '=', '[', an augmented assignment such as '+=' or subscripts
# CHECK:      note: did you mean copy_start?
kernel statement(x: f32[8], y: f32[8]) {
  s = semaphore
  copy_strat x -> y, s
}

# -----
# CHECK:      hints.cpy:[[# @LINE + 2]]:17: error: Unknown dtype: flaot32
# CHECK:      note: did you mean float32?
kernel dtype(x: flaot32[8]) {
}

# -----
# CHECK:      hints.cpy:[[# @LINE + 4]]:15: error: unexpected '.'
# CHECK:      note: copyir writes a view without .at: x[0:8], not x.at[0:8]
kernel at(x: f32[8], y: f32[8]) {
  s = semaphore
  copy_start x.at[0:4] -> y.at[0:4], s
}

# -----
# CHECK:      hints.cpy:[[# @LINE + 4]]:18: error: unexpected '.'
# CHECK:      note: copyir writes pl.ds(start, size) without pl.: x[ds(8, 8)] for x[pl.ds(8, 8)] (or the slice x[8:16])
kernel ds(x: f32[8], y: f32[8]) {
  s = semaphore
  copy_start x[pl.ds(0, 4)] -> y[0:4], s
}

# -----
# `//` is floor division in an index expression, and a comment where the
# statement could end.
# CHECK:      hints.cpy:[[# @LINE + 5]]:38: error: unexpected '//'
# CHECK:      note: comments start with # in copyir, not //
kernel floor(x: f32[8], y: f32[8]) {
  s = semaphore
  for i in range(4) {
    copy_start x[i // 2] -> y[0], s  // one element
  }
}

# -----
# CHECK:      hints.cpy:[[# @LINE + 3]]:20: error: unexpected end of line; expected ','
# CHECK:      note: a DMA names its semaphore after the destination: copy_start src -> dst, sem
kernel no_semaphore(x: f32[8], y: f32[8]) {
  copy_start x -> y
}

# -----
# CHECK:      hints.cpy:[[# @LINE + 6]]:3: error: DMA source and target shape mismatch.
# CHECK-NEXT:   copy_start x -> buf, s
# CHECK-NEXT:   ^
# CHECK-NEXT: note: x is f32[8] @hbm, buf is f32[4] @vmem
kernel shapes(x: f32[8]) {
  buf = alloc f32[4] @vmem; s = semaphore
  copy_start x -> buf, s
}
