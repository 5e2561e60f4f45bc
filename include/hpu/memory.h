/* libhpu — device memory: allocation, copies, Habana memory statistics. */
#ifndef HPU_MEMORY_H
#define HPU_MEMORY_H

#include <hpu/device.h>

/* Sizes are rounded up to this granularity; every figure counts rounded bytes. */
#define HPU_MEM_GRANULARITY 512

typedef enum hpuMemcpyKind {
  HPU_MEMCPY_HOST_TO_DEVICE = 1,
  HPU_MEMCPY_DEVICE_TO_HOST = 2,
  HPU_MEMCPY_DEVICE_TO_DEVICE = 3
} hpuMemcpyKind_t;

/* Habana's ten memory figures, in Habana's order, then the allocator's three.
 * Set struct_size (HPU_MEM_STATS_INIT) before the call. */
typedef struct hpuMemStats {
  size_t struct_size;
  uint64_t limit;               /* Limit: capacity x memory fraction */
  uint64_t in_use;              /* InUse: bytes held by live allocations */
  uint64_t max_in_use;          /* MaxInUse: peak of InUse since the last reset */
  uint64_t num_allocs;          /* NumAllocs: since the last accumulated reset */
  uint64_t num_frees;           /* NumFrees: since the last accumulated reset */
  int64_t active_allocs;        /* ActiveAllocs: num_allocs - num_frees, may be < 0 */
  uint64_t max_alloc_size;      /* MaxAllocSize: since the last accumulated reset */
  uint64_t total_system_allocs; /* TotalSystemAllocs: since start, never reset */
  uint64_t total_system_frees;  /* TotalSystemFrees: since start, never reset */
  int64_t total_active_allocs;  /* TotalActiveAllocs: the difference of the two */
  uint64_t reserved_bytes;      /* ReservedBytes: held from the system now */
  uint64_t segment_allocs;      /* SegmentAllocs: segments taken from the system */
  uint64_t segment_frees;       /* SegmentFrees: segments given back */
} hpuMemStats_t;

#define HPU_MEM_STATS_INIT {sizeof(hpuMemStats_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

HPU_EXTERN_C_BEGIN

/* Allocates `bytes` of device memory. bytes == 0 gives *ptr = NULL. */
HPU_API hpuStatus_t hpuMemAlloc(void **ptr, hpuDevice_t dev, size_t bytes);
/* Frees an allocation from hpuMemAlloc (its device is the one it came from);
 * NULL is accepted. While queued work may still use it, the free is deferred
 * until that work completes (see hpuMemFree(3)). HPU_ERROR_BUSY, nothing
 * freed, while a tensor handle (hpuTensorWrap, or a view of it) wraps the
 * allocation. */
HPU_API hpuStatus_t hpuMemFree(void *ptr);

/* Device memory taken by the functions below must lie inside one live
 * allocation (the bytes asked for; it may start inside one) of an open
 * device: else HPU_ERROR_INVALID_HANDLE (freed, never allocated, or of a
 * closed device) or HPU_ERROR_INVALID_ARGUMENT (runs past the allocation's
 * end), and nothing is queued. */

/* Synchronous copy on the default stream of the device involved. */
HPU_API hpuStatus_t hpuMemcpy(void *dst, const void *src, size_t bytes, hpuMemcpyKind_t kind);
/* Queued copy; stream NULL means the default stream of the device involved. Host
 * memory must stay valid until the copy completes. */
HPU_API hpuStatus_t hpuMemcpyAsync(hpuStream_t stream, void *dst, const void *src, size_t bytes, hpuMemcpyKind_t kind);
/* Queued gather: count rows of row_bytes bytes, row i of dst (dst + i
 * row_bytes) from row rows[i] of src (src + rows[i] row_bytes): a batch's
 * samples straight from a dataset, with no copy of them gathered first.
 * kind and stream as hpuMemcpyAsync; rows is read before the call returns
 * (every row must lie in src's allocation when src is device memory, in
 * memory mapped by the process when it is host memory); src's rows must stay
 * valid until the copy completes, and dst must not overlap them. */
HPU_API hpuStatus_t hpuMemcpyRowsAsync(hpuStream_t stream, void *dst, const void *src, size_t row_bytes,
                                       const int64_t *rows, size_t count, hpuMemcpyKind_t kind);
/* Sets `bytes` of device memory to the byte `value` (0..255), synchronously. */
HPU_API hpuStatus_t hpuMemset(void *dst, int value, size_t bytes);
HPU_API hpuStatus_t hpuMemsetAsync(hpuStream_t stream, void *dst, int value, size_t bytes);

/* (Limit - InUse, Limit), as Habana's mem_get_info. */
HPU_API hpuStatus_t hpuMemGetInfo(hpuDevice_t dev, size_t *free_bytes, size_t *total_bytes);
/* Gives cached, unused segments back to the system. */
HPU_API hpuStatus_t hpuMemEmptyCache(hpuDevice_t dev);

HPU_API hpuStatus_t hpuMemStats(hpuDevice_t dev, hpuMemStats_t *stats);
/* The same figures as a JSON object with Habana's key names in Habana's order,
 * then ReservedBytes, SegmentAllocs, SegmentFrees. Release *json with hpuFree. */
HPU_API hpuStatus_t hpuMemStatsJson(hpuDevice_t dev, char **json);
/* MaxInUse = 0. */
HPU_API hpuStatus_t hpuMemResetPeakStats(hpuDevice_t dev);
/* NumAllocs = NumFrees = MaxAllocSize = 0, MaxInUse = InUse. */
HPU_API hpuStatus_t hpuMemResetAccumulatedStats(hpuDevice_t dev);

HPU_EXTERN_C_END

#endif /* HPU_MEMORY_H */
