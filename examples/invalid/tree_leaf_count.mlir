// A sync_copy's tree spec must have one leaf per operand.

copy.kernel @tree_leaf_count(%a : !copy.ref<8xf32, hbm>, %b : !copy.ref<8xf32, hbm>) {
  %va = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{Pytree (*, *) has 2 leaves but 1 operands}}
  "copy.sync_copy"(%a, %b, %va) <{src_tree = "(*, *)", dst_tree = "(*, *)", operandSegmentSizes = array<i32: 2, 1>}> : (!copy.ref<8xf32, hbm>, !copy.ref<8xf32, hbm>, !copy.ref<8xf32, vmem>) -> ()
}
