// Data types as kernels see them: sizes, names, classes, and a switch helper.
#pragma once

#include <hpu/types.h>

#include <cstddef>
#include <cstdint>

namespace hpu::kernels {

inline bool dtype_valid(int dt) { return dt >= 0 && dt < HPU_NUM_DATA_TYPES; }

inline size_t dtype_size(hpuDataType_t dt) {
  switch (dt) {
    case HPU_BOOL: case HPU_UINT8: case HPU_INT8: return 1;
    case HPU_FLOAT16: case HPU_BFLOAT16: return 2;
    case HPU_INT32: case HPU_UINT32: case HPU_FLOAT32: return 4;
    case HPU_INT64: case HPU_UINT64: case HPU_FLOAT64: return 8;
  }
  return 0;
}

// "bool", "u8", "i8", "i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64";
// "?" for a number that is not a data type.
inline const char *dtype_name(hpuDataType_t dt) {
  static const char *names[HPU_NUM_DATA_TYPES] = {"bool", "u8", "i8", "i32", "u32", "i64",
                                                  "u64",  "f16", "bf16", "f32", "f64"};
  return dtype_valid(dt) ? names[dt] : "?";
}

inline bool is_floating(hpuDataType_t dt) {
  return dt == HPU_FLOAT16 || dt == HPU_BFLOAT16 || dt == HPU_FLOAT32 || dt == HPU_FLOAT64;
}

// 16-bit float storage types, distinct from uint16_t so templates can tell them apart.
struct bf16 { uint16_t bits; };
struct f16 { uint16_t bits; };

// Calls fn(T{}) with the C++ type that stores dt: bool -> uint8_t (0 or 1),
// bf16/f16 -> the structs above.
template <class Fn>
decltype(auto) dispatch(hpuDataType_t dt, Fn &&fn) {
  switch (dt) {
    case HPU_BOOL: case HPU_UINT8: return fn(uint8_t{});
    case HPU_INT8: return fn(int8_t{});
    case HPU_INT32: return fn(int32_t{});
    case HPU_UINT32: return fn(uint32_t{});
    case HPU_INT64: return fn(int64_t{});
    case HPU_UINT64: return fn(uint64_t{});
    case HPU_FLOAT16: return fn(f16{});
    case HPU_BFLOAT16: return fn(bf16{});
    case HPU_FLOAT32: return fn(float{});
    case HPU_FLOAT64: break;
  }
  return fn(double{});
}

}  // namespace hpu::kernels
