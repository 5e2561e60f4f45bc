/* libhpu — Habana-style autocast: which precision each op runs in. See hpu(7). */
#ifndef HPU_AUTOCAST_H
#define HPU_AUTOCAST_H

#include <hpu/status.h>

/* The three op lists. An op looks its forward (ATen base) name up, in this
 * order: lower precision (floating inputs run in the autocast dtype), fp32
 * (they run in f32), promote (they run in the widest input type). */
typedef enum hpuAutocastList {
  HPU_AUTOCAST_LOWER_PRECISION = 0,
  HPU_AUTOCAST_FP32 = 1,
  HPU_AUTOCAST_PROMOTE = 2
} hpuAutocastList_t;

HPU_EXTERN_C_BEGIN

/* Enters an autocast region on the calling thread: `enabled` (nonzero) turns
 * autocast on, 0 turns it off inside an enclosing region; `dtype` is the
 * lower-precision type, HPU_BFLOAT16 (Habana's default) or HPU_FLOAT16.
 * Regions nest; each thread has its own stack. */
HPU_API hpuStatus_t hpuAutocastPush(int enabled, hpuDataType_t dtype);

/* Leaves the innermost region of the calling thread; HPU_ERROR_INVALID_USAGE
 * when the thread has none. */
HPU_API hpuStatus_t hpuAutocastPop(void);

/* The innermost region of the calling thread: *enabled 0 or 1, *dtype the
 * lower-precision type. Outside any region: 0 and HPU_BFLOAT16. Either pointer
 * may be NULL. */
HPU_API hpuStatus_t hpuAutocastGetState(int *enabled, hpuDataType_t *dtype);

/* Replaces one list for the whole process, for ops enqueued afterwards, with
 * `count` op names (count 0 empties it). Unknown names are kept and logged as
 * a warning naming the nearest known op. */
HPU_API hpuStatus_t hpuAutocastSetOpList(hpuAutocastList_t which, const char *const *names, size_t count);

/* One list as text, one op name a line in sorted order; release *names with
 * hpuFree. */
HPU_API hpuStatus_t hpuAutocastGetOpList(hpuAutocastList_t which, char **names);

/* The type the first of an op's tensor inputs runs in if the calling thread
 * enqueued the op now: `op` is its forward's ATen base name ("mm", "tan"),
 * inputs[0..count) the dtypes of its tensor inputs (count >= 1). Only f16,
 * bf16 and f32 inputs are ever cast. */
HPU_API hpuStatus_t hpuAutocastGetOpDtype(const char *op, const hpuDataType_t *inputs, size_t count,
                                          hpuDataType_t *dtype);

HPU_EXTERN_C_END

#endif /* HPU_AUTOCAST_H */
