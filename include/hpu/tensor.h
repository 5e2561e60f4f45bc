/* libhpu — tensors over device memory, and the per-device random generator. */
#ifndef HPU_TENSOR_H
#define HPU_TENSOR_H

#include <hpu/memory.h>

/* A tensor: device, data type, shape (0..HPU_TENSOR_MAX_DIMS dims) and strides
 * (in elements, may be 0 for broadcast-like views) over device memory that is
 * owned by the tensor, borrowed from hpuMemAlloc (hpuTensorWrap), or shared with
 * a base tensor (views, which keep their base's memory alive). A 0-dim tensor
 * holds one element. Owned memory comes from the device's caching allocator, so
 * it shows in hpuMemStats. Tensor handles are thread-safe to use from any
 * thread; their contents follow stream order. */
typedef struct hpuTensor_st *hpuTensor_t;

#define HPU_TENSOR_MAX_DIMS 8

/* State of a device's random generator: Philox4x32-10 keyed by `seed`, at
 * counter `offset` (each element a fill draws takes one counter). */
typedef struct hpuRandomState {
  size_t struct_size;
  uint64_t seed;
  uint64_t offset;
} hpuRandomState_t;

#define HPU_RANDOM_STATE_INIT {sizeof(hpuRandomState_t), 0, 0}

HPU_EXTERN_C_BEGIN

/* ---- life ---------------------------------------------------------------- */

/* New contiguous (row-major) tensor on `dev`; contents are unspecified (as
 * torch.empty). shape may be NULL when ndim is 0. The sizes, with 0 counted
 * as 1, may multiply to at most 2^60 (else HPU_ERROR_INVALID_ARGUMENT). */
HPU_API hpuStatus_t hpuTensorCreate(hpuTensor_t *tensor, hpuDevice_t dev, hpuDataType_t dtype, int ndim,
                                    const int64_t *shape);

/* As hpuTensorCreate, then copies numel x element size bytes from host `data`
 * (row-major), synchronously on the device's default stream. */
HPU_API hpuStatus_t hpuTensorCreateFromHost(hpuTensor_t *tensor, hpuDevice_t dev, hpuDataType_t dtype, int ndim,
                                            const int64_t *shape, const void *data);

/* A tensor over device memory from hpuMemAlloc, not owned: releasing the tensor
 * leaves the memory allocated. strides NULL means contiguous; strides are
 * >= 0, so data is the lowest byte touched. Every element must lie inside one
 * live allocation of an open device. A stride that puts an element more than
 * 2^63 bytes past data (checked without overflow, even when the tensor is
 * empty; the stride of a size-1 dim is ignored) is HPU_ERROR_INVALID_ARGUMENT
 * naming it. Until the tensor and every view of it are released, hpuMemFree of
 * that allocation fails with HPU_ERROR_BUSY. */
HPU_API hpuStatus_t hpuTensorWrap(hpuTensor_t *tensor, void *data, hpuDataType_t dtype, int ndim,
                                  const int64_t *shape, const int64_t *strides);

/* Drops one reference to the handle; the last one releases it. Owned memory
 * is freed once no view uses it and queued work that may use it has
 * completed. NULL is accepted. */
HPU_API hpuStatus_t hpuTensorRelease(hpuTensor_t tensor);

/* Adds a reference to the handle (thread-safe): it stays live, the same
 * value, until hpuTensorRelease has been called once more for each retain,
 * so two owners may each release it. A handle starts with one reference. */
HPU_API hpuStatus_t hpuTensorRetain(hpuTensor_t tensor);

/* ---- data ---------------------------------------------------------------- */

/* Copies numel x element size bytes between host memory (row-major, densely
 * packed, whatever the tensor's strides) and the tensor. Ordered on `stream`
 * (NULL: the default stream of the tensor's device); returns once the copy and
 * everything queued before it on that stream has completed. */
HPU_API hpuStatus_t hpuTensorCopyFromHost(hpuStream_t stream, hpuTensor_t tensor, const void *src, size_t bytes);
HPU_API hpuStatus_t hpuTensorCopyToHost(hpuStream_t stream, hpuTensor_t tensor, void *dst, size_t bytes);

/* dst[i] = src[i] elementwise for tensors of the same shape, converting the
 * data type (floating to integer truncates toward zero and saturates; NaN
 * becomes 0; to bf16/f16 rounds to nearest even). The tensors may be on
 * different devices; queued on `stream` (NULL: dst's default stream). */
HPU_API hpuStatus_t hpuTensorCopy(hpuStream_t stream, hpuTensor_t dst, hpuTensor_t src);

/* Sets every element to `value` converted to the tensor's type; queued. */
HPU_API hpuStatus_t hpuTensorFill(hpuStream_t stream, hpuTensor_t tensor, double value);

/* ---- views (share memory with `base` and keep it alive) -------------------- */

/* Same elements, new shape; base must be contiguous. One entry of shape may
 * be -1: it is inferred. Sizes that multiply past 2^60 (the -1 and zeros
 * counted as 1) are HPU_ERROR_INVALID_ARGUMENT. */
HPU_API hpuStatus_t hpuTensorReshape(hpuTensor_t *view, hpuTensor_t base, int ndim, const int64_t *shape);

/* Elements start, start + step, ... < end along `dim` (negative dim counts from
 * the end; 0 <= start <= end <= size; step >= 1). Any step >= 1 is valid: one
 * past the end keeps one element, and a dim of one element keeps the base's
 * stride (the stride is multiplied by step only when two or more remain). */
HPU_API hpuStatus_t hpuTensorSlice(hpuTensor_t *view, hpuTensor_t base, int dim, int64_t start, int64_t end,
                                   int64_t step);

/* Swaps two dims (negative dims count from the end). */
HPU_API hpuStatus_t hpuTensorTranspose(hpuTensor_t *view, hpuTensor_t base, int dim0, int dim1);

/* A contiguous tensor of `shape` over elements [offset, offset + numel) of a
 * contiguous base seen as flat: a parameter's gradient inside a bucket. */
HPU_API hpuStatus_t hpuTensorWindow(hpuTensor_t *view, hpuTensor_t base, int64_t offset, int ndim,
                                    const int64_t *shape);

/* ---- introspection --------------------------------------------------------- */

HPU_API hpuStatus_t hpuTensorGetDtype(hpuTensor_t tensor, hpuDataType_t *dtype);
/* *ndim = number of dims; shape (if not NULL) receives ndim sizes: pass an
 * array of HPU_TENSOR_MAX_DIMS. */
HPU_API hpuStatus_t hpuTensorGetShape(hpuTensor_t tensor, int *ndim, int64_t *shape);
/* ndim strides, in elements. */
HPU_API hpuStatus_t hpuTensorGetStrides(hpuTensor_t tensor, int64_t *strides);
HPU_API hpuStatus_t hpuTensorGetNumel(hpuTensor_t tensor, int64_t *numel);
HPU_API hpuStatus_t hpuTensorGetElementSize(hpuTensor_t tensor, size_t *size);
/* The (open) device handle the tensor lives on. */
HPU_API hpuStatus_t hpuTensorGetDevice(hpuTensor_t tensor, hpuDevice_t *dev);
/* Device address of element 0 (NULL for an empty tensor). */
HPU_API hpuStatus_t hpuTensorGetData(hpuTensor_t tensor, void **data);
/* 1 when the elements are densely packed in row-major order, else 0. */
HPU_API hpuStatus_t hpuTensorIsContiguous(hpuTensor_t tensor, int *contiguous);

/* ---- random numbers -------------------------------------------------------- */

/* Each device has one generator (seed 0, offset 0 when the process starts).
 * A fill reserves numel counters when it is called, so results depend only on
 * the order of calls, not on threads or streams. */
HPU_API hpuStatus_t hpuRandomSeed(hpuDevice_t dev, uint64_t seed);
HPU_API hpuStatus_t hpuRandomGetState(hpuDevice_t dev, hpuRandomState_t *state);
HPU_API hpuStatus_t hpuRandomSetState(hpuDevice_t dev, const hpuRandomState_t *state);

/* Floating tensors only: uniform in [low, high), or normal(mean, std). */
HPU_API hpuStatus_t hpuTensorFillUniform(hpuStream_t stream, hpuTensor_t tensor, double low, double high);
HPU_API hpuStatus_t hpuTensorFillNormal(hpuStream_t stream, hpuTensor_t tensor, double mean, double std);

HPU_EXTERN_C_END

#endif /* HPU_TENSOR_H */
