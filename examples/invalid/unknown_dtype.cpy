# Element types: bool, i8, i16, i32, i64, u8, u16, u32, f16, f32, f64, bf16
# (or their numpy names, float32 and so on).

kernel unknown_dtype(x: f32[8, 128] @hbm) {
  # expected-error@+1 {{Unknown dtype: f8 (expected one of bool, i8, i16, i32, i64, u8, u16, u32, f16, f32, f64, bf16)}}
  buf = alloc f8[8, 128] @vmem
}
