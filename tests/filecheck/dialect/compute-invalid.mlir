// RUN: copyir verify --split-input-file --verify-diagnostics %s

// A computation's region and its scalar ops: each mistake one message,
// located at the computation. The dtype rules are the scalar ops' own.

copy.kernel @k(%x : !copy.ref<8xi32, hbm>) {
  %a = copy.alloc : !copy.ref<8xi32, vmem>
  // expected-error@+1 {{/ is for floats; the destination is i32}}
  copy.compute %a (%a) : !copy.ref<8xi32, vmem>, !copy.ref<8xi32, vmem> {
  ^bb0(%p: i32):
    %0 = scalar.div %p, %p : i32
    scalar.yield %0 : i32
  }
}

// -----

copy.kernel @k(%x : !copy.ref<8xi1, hbm>) {
  %a = copy.alloc : !copy.ref<8xi1, vmem>
  // expected-error@+1 {{- is not defined on bool: numpy and JAX refuse to negate or subtract booleans}}
  copy.compute %a (%a) : !copy.ref<8xi1, vmem>, !copy.ref<8xi1, vmem> {
  ^bb0(%p: i1):
    %0 = scalar.neg %p : i1
    scalar.yield %0 : i1
  }
}

// -----

copy.kernel @k(%x : !copy.ref<8xi1, hbm>) {
  %a = copy.alloc : !copy.ref<8xi1, vmem>
  // expected-error@+1 {{- is not defined on bool: numpy and JAX refuse to negate or subtract booleans}}
  copy.compute %a (%a) : !copy.ref<8xi1, vmem>, !copy.ref<8xi1, vmem> {
  ^bb0(%p: i1):
    %0 = scalar.sub %p, %p : i1
    scalar.yield %0 : i1
  }
}

// -----

copy.kernel @k(%x : !copy.ref<8xi32, hbm>) {
  %a = copy.alloc : !copy.ref<8xi32, vmem>
  // expected-error@+1 {{Float literal 0.5 for an integer destination of i32}}
  copy.compute %a () : !copy.ref<8xi32, vmem> {
    %0 = scalar.constant "0.5" : i32
    scalar.yield %0 : i32
  }
}

// -----

copy.kernel @k(%x : !copy.ref<8xi8, hbm>) {
  %a = copy.alloc : !copy.ref<8xi8, vmem>
  // expected-error@+1 {{Literal 300 does not fit the destination's i8}}
  copy.compute %a () : !copy.ref<8xi8, vmem> {
    %0 = scalar.constant "300" : i8
    scalar.yield %0 : i8
  }
}

// -----

// Of two mistakes, the outermost operation's is reported first, as the
// expression `1.5 / a` reads.
copy.kernel @k(%x : !copy.ref<8xi32, hbm>) {
  %a = copy.alloc : !copy.ref<8xi32, vmem>
  // expected-error@+1 {{/ is for floats; the destination is i32}}
  copy.compute %a (%a) : !copy.ref<8xi32, vmem>, !copy.ref<8xi32, vmem> {
  ^bb0(%p: i32):
    %0 = scalar.constant "1.5" : i32
    %1 = scalar.div %0, %p : i32
    scalar.yield %1 : i32
  }
}

// -----

copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{A computation's region takes one argument per input: 1 inputs, 2 arguments}}
  copy.compute %a (%a) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
  ^bb0(%p: f32, %q: f32):
    scalar.yield %p : f32
  }
}

// -----

copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{A computation's region computes in its destination's f32, not in f64}}
  copy.compute %a (%a) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
  ^bb0(%p: f64):
    scalar.yield %p : f64
  }
}

// -----

copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{A computation's region holds scalar operations and ends with one scalar.yield, not scalar.neg}}
  copy.compute %a (%a) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
  ^bb0(%p: f32):
    %0 = scalar.neg %p : f32
  }
}

// -----

copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{A computation's region holds scalar operations and ends with one scalar.yield, not copy.alloc}}
  copy.compute %a (%a) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
  ^bb0(%p: f32):
    %b = copy.alloc : !copy.ref<8xf32, vmem>
    scalar.yield %p : f32
  }
}

// -----

copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  %c = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{A computation's region takes its inputs as arguments; c is defined outside it}}
  copy.compute %a (%a) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
  ^bb0(%p: f32):
    %0 = "scalar.add"(%p, %c) : (f32, !copy.ref<8xf32, vmem>) -> f32
    scalar.yield %0 : f32
  }
}

// -----

copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{A computation's region holds scalar operations and ends with one scalar.yield, not scalar.yield}}
  copy.compute %a (%a) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
  ^bb0(%p: f32):
    scalar.yield %p : f32
    scalar.yield %p : f32
  }
}

// -----

// A chain deeper than the authoring syntax's nesting limit.
copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{Input is nested too deeply (more than 64 levels)}}
  copy.compute %a (%a) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
  ^bb0(%p: f32):
    %0 = scalar.neg %p : f32
    %1 = scalar.neg %0 : f32
    %2 = scalar.neg %1 : f32
    %3 = scalar.neg %2 : f32
    %4 = scalar.neg %3 : f32
    %5 = scalar.neg %4 : f32
    %6 = scalar.neg %5 : f32
    %7 = scalar.neg %6 : f32
    %8 = scalar.neg %7 : f32
    %9 = scalar.neg %8 : f32
    %10 = scalar.neg %9 : f32
    %11 = scalar.neg %10 : f32
    %12 = scalar.neg %11 : f32
    %13 = scalar.neg %12 : f32
    %14 = scalar.neg %13 : f32
    %15 = scalar.neg %14 : f32
    %16 = scalar.neg %15 : f32
    %17 = scalar.neg %16 : f32
    %18 = scalar.neg %17 : f32
    %19 = scalar.neg %18 : f32
    %20 = scalar.neg %19 : f32
    %21 = scalar.neg %20 : f32
    %22 = scalar.neg %21 : f32
    %23 = scalar.neg %22 : f32
    %24 = scalar.neg %23 : f32
    %25 = scalar.neg %24 : f32
    %26 = scalar.neg %25 : f32
    %27 = scalar.neg %26 : f32
    %28 = scalar.neg %27 : f32
    %29 = scalar.neg %28 : f32
    %30 = scalar.neg %29 : f32
    %31 = scalar.neg %30 : f32
    %32 = scalar.neg %31 : f32
    %33 = scalar.neg %32 : f32
    %34 = scalar.neg %33 : f32
    %35 = scalar.neg %34 : f32
    %36 = scalar.neg %35 : f32
    %37 = scalar.neg %36 : f32
    %38 = scalar.neg %37 : f32
    %39 = scalar.neg %38 : f32
    %40 = scalar.neg %39 : f32
    %41 = scalar.neg %40 : f32
    %42 = scalar.neg %41 : f32
    %43 = scalar.neg %42 : f32
    %44 = scalar.neg %43 : f32
    %45 = scalar.neg %44 : f32
    %46 = scalar.neg %45 : f32
    %47 = scalar.neg %46 : f32
    %48 = scalar.neg %47 : f32
    %49 = scalar.neg %48 : f32
    %50 = scalar.neg %49 : f32
    %51 = scalar.neg %50 : f32
    %52 = scalar.neg %51 : f32
    %53 = scalar.neg %52 : f32
    %54 = scalar.neg %53 : f32
    %55 = scalar.neg %54 : f32
    %56 = scalar.neg %55 : f32
    %57 = scalar.neg %56 : f32
    %58 = scalar.neg %57 : f32
    %59 = scalar.neg %58 : f32
    %60 = scalar.neg %59 : f32
    %61 = scalar.neg %60 : f32
    %62 = scalar.neg %61 : f32
    %63 = scalar.neg %62 : f32
    %64 = scalar.neg %63 : f32
    scalar.yield %64 : f32
  }
}

// -----

// Shared values make a small region stand for a large expression, which the
// stream's prefix form writes out: the first value beyond the limit is
// refused (%19, 2^21 - 1 operations).
copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{Computation too large: 2097151 operations once its shared values are written out, more than 1048576}}
  copy.compute %a (%a) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
  ^bb0(%p: f32):
    %0 = scalar.add %p, %p : f32
    %1 = scalar.add %0, %0 : f32
    %2 = scalar.add %1, %1 : f32
    %3 = scalar.add %2, %2 : f32
    %4 = scalar.add %3, %3 : f32
    %5 = scalar.add %4, %4 : f32
    %6 = scalar.add %5, %5 : f32
    %7 = scalar.add %6, %6 : f32
    %8 = scalar.add %7, %7 : f32
    %9 = scalar.add %8, %8 : f32
    %10 = scalar.add %9, %9 : f32
    %11 = scalar.add %10, %10 : f32
    %12 = scalar.add %11, %11 : f32
    %13 = scalar.add %12, %12 : f32
    %14 = scalar.add %13, %13 : f32
    %15 = scalar.add %14, %14 : f32
    %16 = scalar.add %15, %15 : f32
    %17 = scalar.add %16, %16 : f32
    %18 = scalar.add %17, %17 : f32
    %19 = scalar.add %18, %18 : f32
    %20 = scalar.add %19, %19 : f32
    %21 = scalar.add %20, %20 : f32
    %22 = scalar.add %21, %21 : f32
    %23 = scalar.add %22, %22 : f32
    %24 = scalar.add %23, %23 : f32
    scalar.yield %24 : f32
  }
}
