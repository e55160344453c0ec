# RUN: copyir verify --emit cpy %s | filecheck %s
# RUN: copyir verify --emit mlir %s | copyir verify --input-format mlir --emit cpy - | filecheck %s
# RUN: copyir verify --emit mlir --no-debuginfo %s | filecheck %s --check-prefix=MLIR
# RUN: copyir verify --emit cpy --debuginfo %s | copyir verify --input-format cpy --emit mlir - | filecheck %s --check-prefix=LOC

# An opaque computation prints back as written: the string naming it, the
# refs it reads and the refs it writes (views inline), in the authoring
# syntax and through the MLIR form, its location kept with --debuginfo.

# CHECK:      kernel k(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
kernel k(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  a = alloc f32[8, 128] @vmem
  b = alloc f32[8, 128] @vmem
  m = alloc f32[] @smem
  sync_copy x -> a
  # CHECK:        opaque "exp" (a, m) -> (b)
  # MLIR:         copy.opaque "exp" (%a, %m) -> (%b) : !copy.ref<8x128xf32, vmem>, !copy.ref<f32, smem> -> !copy.ref<8x128xf32, vmem>
  # LOC:          copy.opaque "exp" (%a, %m) -> (%b) {{.*}} loc("{{.*}}opaque.cpy":[[# @LINE + 1]]:3)
  opaque "exp" (a, m) -> (b)
  # CHECK-NEXT:   opaque "dot_general, \"exp\"" (a[0:4], b[4]) -> (b[0:4, :], m)
  # MLIR:         %0 = copy.view %a[0:4]
  # MLIR-NEXT:    %1 = copy.view %b[4]
  # MLIR-NEXT:    %2 = copy.view %b[0:4, 0:128]
  # MLIR-NEXT:    copy.opaque "dot_general, \22exp\22" (%0, %1) -> (%2, %m)
  opaque "dot_general, \"exp\"" (a[0:4], b[4],) -> (b[0:4, :], m)
  # CHECK-NEXT:   opaque "debug_print" () -> ()
  # MLIR:         copy.opaque "debug_print" () -> () : ->
  opaque "debug_print" () -> ()
  # CHECK-NEXT:   sync_copy b -> y
  sync_copy b -> y
}
