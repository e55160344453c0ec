// The generic MLIR form spells the action as `#copy<action start>` or as a
// string property; the verifier accepts exactly "start" or "wait".

copy.kernel @unknown_action_generic(%x : !copy.ref<8x128xf32, hbm>) {
  %buf = copy.alloc : !copy.ref<8x128xf32, vmem>
  %s = copy.semaphore : !copy.sem
  // expected-error@+1 {{Unknown action: commit}}
  "copy.dma"(%x, %buf, %s) <{action = "commit"}> : (!copy.ref<8x128xf32, hbm>, !copy.ref<8x128xf32, vmem>, !copy.sem) -> ()
}
