/* libhpu — common types: export macro, handles, data types. */
#ifndef HPU_TYPES_H
#define HPU_TYPES_H

#include <stddef.h>
#include <stdint.h>

#if defined(HPU_BUILDING_LIBRARY)
#define HPU_API __attribute__((visibility("default")))
#else
#define HPU_API
#endif

#ifdef __cplusplus
#define HPU_EXTERN_C_BEGIN extern "C" {
#define HPU_EXTERN_C_END }
#else
#define HPU_EXTERN_C_BEGIN
#define HPU_EXTERN_C_END
#endif

/* Opaque handles. A closed, foreign or wrong-kind handle is rejected with
 * HPU_ERROR_INVALID_HANDLE; it never crashes the library. */
typedef struct hpuDevice_st *hpuDevice_t;
typedef struct hpuStream_st *hpuStream_t;
typedef struct hpuEvent_st *hpuEvent_t;

/* One data-type enum for tensors and collectives. Numbers are fixed forever. */
typedef enum hpuDataType {
  HPU_BOOL = 0,
  HPU_UINT8 = 1,
  HPU_INT8 = 2,
  HPU_INT32 = 3,
  HPU_UINT32 = 4,
  HPU_INT64 = 5,
  HPU_UINT64 = 6,
  HPU_FLOAT16 = 7,
  HPU_BFLOAT16 = 8,
  HPU_FLOAT32 = 9,
  HPU_FLOAT64 = 10
} hpuDataType_t;

#define HPU_NUM_DATA_TYPES 11

#endif /* HPU_TYPES_H */
