// Device memory at the C boundary.
#include <jansson.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "api/api.hpp"
#include "device/device.hpp"
#include "kernels/parallel.hpp"

using namespace hpu;

namespace {

const char *kind_name(hpuMemcpyKind_t kind) {
  switch (kind) {
    case HPU_MEMCPY_HOST_TO_DEVICE: return "HPU_MEMCPY_HOST_TO_DEVICE";
    case HPU_MEMCPY_DEVICE_TO_HOST: return "HPU_MEMCPY_DEVICE_TO_HOST";
    case HPU_MEMCPY_DEVICE_TO_DEVICE: return "HPU_MEMCPY_DEVICE_TO_DEVICE";
  }
  return "?";
}

// Checks a copy's pointers against its kind (dst_bytes from dst, src_bytes
// from src); returns the device whose stream runs it.
Device &copy_device(void *dst, size_t dst_bytes, const void *src, size_t src_bytes, hpuMemcpyKind_t kind) {
  HPU_CHECK_ARG(kind == HPU_MEMCPY_HOST_TO_DEVICE || kind == HPU_MEMCPY_DEVICE_TO_HOST ||
                    kind == HPU_MEMCPY_DEVICE_TO_DEVICE,
                "kind %d is not an hpuMemcpyKind_t", static_cast<int>(kind));
  HPU_CHECK_ARG(dst != nullptr, "dst is NULL");
  HPU_CHECK_ARG(src != nullptr, "src is NULL");
  Device *dd = device_of(dst, dst_bytes);
  Device *sd = device_of(src, src_bytes);
  bool dst_dev = kind != HPU_MEMCPY_DEVICE_TO_HOST, src_dev = kind != HPU_MEMCPY_HOST_TO_DEVICE;
  if (dst_dev && !dd)
    fail(HPU_ERROR_INVALID_HANDLE, "dst %p (+%zu bytes) is not device memory, as %s requires", dst, dst_bytes,
         kind_name(kind));
  if (src_dev && !sd)
    fail(HPU_ERROR_INVALID_HANDLE, "src %p (+%zu bytes) is not device memory, as %s requires", src, src_bytes,
         kind_name(kind));
  if (!dst_dev && dd)
    fail(HPU_ERROR_INVALID_ARGUMENT, "dst %p is device memory but kind is %s; use HPU_MEMCPY_DEVICE_TO_DEVICE",
         dst, kind_name(kind));
  if (!src_dev && sd)
    fail(HPU_ERROR_INVALID_ARGUMENT, "src %p is device memory but kind is %s; use HPU_MEMCPY_DEVICE_TO_DEVICE",
         src, kind_name(kind));
  return kind == HPU_MEMCPY_DEVICE_TO_HOST ? *sd : *dd;
}

Device &set_device(void *dst, size_t bytes, int value) {
  HPU_CHECK_ARG(dst != nullptr, "dst is NULL");
  HPU_CHECK_ARG(value >= 0 && value <= 255, "value %d is not a byte (0..255)", value);
  Device *d = device_of(dst, bytes);
  if (!d) fail(HPU_ERROR_INVALID_HANDLE, "dst %p (+%zu bytes) is not device memory", dst, bytes);
  return *d;
}

// The figures of hpuMemStats_t, for hpuMemStats and hpuMemStatsJson.
hpuMemStats_t public_stats(hpuDevice_t dev) {
  MemStats s = device_from_handle(dev).stats();
  hpuMemStats_t out = HPU_MEM_STATS_INIT;
  out.limit = s.limit;
  out.in_use = s.in_use;
  out.max_in_use = s.max_in_use;
  out.num_allocs = s.num_allocs;
  out.num_frees = s.num_frees;
  out.active_allocs = static_cast<int64_t>(s.num_allocs) - static_cast<int64_t>(s.num_frees);
  out.max_alloc_size = s.max_alloc_size;
  out.total_system_allocs = s.total_allocs;
  out.total_system_frees = s.total_frees;
  out.total_active_allocs = static_cast<int64_t>(s.total_allocs) - static_cast<int64_t>(s.total_frees);
  out.reserved_bytes = s.reserved;
  out.segment_allocs = s.segment_allocs;
  out.segment_frees = s.segment_frees;
  return out;
}

// The queued work of the copy and fill functions (the profiler sees its bytes).
void queue_copy(Stream &s, void *dst, const void *src, size_t bytes) {
  prof::annotate(bytes, 0);
  s.enqueue([=] { std::memmove(dst, src, bytes); });
}

// The queued work of hpuMemcpyRowsAsync: row i of dst is row rows[i] of src,
// in parallel chunks of at least 64 KiB.
void queue_rows(Stream &s, void *dst, const void *src, size_t row_bytes, std::vector<int64_t> rows) {
  prof::annotate(rows.size() * row_bytes, 0);
  s.enqueue([dst, src, row_bytes, rows = std::move(rows)] {
    const int64_t grain = std::max<int64_t>(1, int64_t((size_t(64) << 10) / row_bytes));
    kernels::parallel_for(int64_t(rows.size()), grain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        std::memcpy(static_cast<char *>(dst) + size_t(i) * row_bytes,
                    static_cast<const char *>(src) + size_t(rows[size_t(i)]) * row_bytes, row_bytes);
    });
  });
}

void queue_set(Stream &s, void *dst, int value, size_t bytes) {
  prof::annotate(bytes, 0);
  s.enqueue([=] { std::memset(dst, value, bytes); });
}

}  // namespace

extern "C" {

HPU_API hpuStatus_t hpuMemAlloc(void **ptr, hpuDevice_t dev, size_t bytes) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(ptr != nullptr, "ptr is NULL");
  Device &d = device_from_handle(dev);
  *ptr = bytes == 0 ? nullptr : d.allocate(bytes);
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemFree(hpuDevice_t dev, void *ptr) {
  HPU_API_BEGIN
  Device &d = device_from_handle(dev);
  if (ptr != nullptr) d.free(ptr);
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemcpyAsync(void *dst, const void *src, size_t bytes, hpuMemcpyKind_t kind,
                                   hpuStream_t stream) {
  HPU_API_BEGIN
  if (bytes == 0) return HPU_SUCCESS;
  Device &d = copy_device(dst, bytes, src, bytes, kind);
  queue_copy(*stream_from_handle(stream, &d), dst, src, bytes);
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemcpyRowsAsync(void *dst, const void *src, size_t row_bytes, const int64_t *rows,
                                       size_t count, hpuMemcpyKind_t kind, hpuStream_t stream) {
  HPU_API_BEGIN
  if (count == 0 || row_bytes == 0) return HPU_SUCCESS;
  HPU_CHECK_ARG(count <= SIZE_MAX / row_bytes, "count %zu rows of row_bytes %zu overflow size_t", count, row_bytes);
  const size_t bytes = count * row_bytes;
  copy_device(dst, bytes, src, row_bytes, kind);  // all of dst before rows is read; src's span below
  HPU_CHECK_ARG(rows != nullptr, "rows is NULL");
  int64_t top = 0;
  for (size_t i = 0; i < count; ++i) {
    HPU_CHECK_ARG(rows[i] >= 0, "rows[%zu] is %lld; row numbers are >= 0", i, static_cast<long long>(rows[i]));
    top = std::max(top, rows[i]);
  }
  // The rows read lie in src's first (top + 1) row_bytes bytes.
  HPU_CHECK_ARG(static_cast<uint64_t>(top) < SIZE_MAX / row_bytes &&
                    (static_cast<size_t>(top) + 1) * row_bytes <= UINTPTR_MAX - reinterpret_cast<uintptr_t>(src),
                "rows holds %lld; that row of row_bytes %zu is past the end of the address space",
                static_cast<long long>(top), row_bytes);
  const size_t span = (static_cast<size_t>(top) + 1) * row_bytes;
  Device &d = copy_device(dst, bytes, src, span, kind);
  queue_rows(*stream_from_handle(stream, &d), dst, src, row_bytes, std::vector<int64_t>(rows, rows + count));
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemcpy(void *dst, const void *src, size_t bytes, hpuMemcpyKind_t kind) {
  HPU_API_BEGIN
  if (bytes == 0) return HPU_SUCCESS;
  Device &d = copy_device(dst, bytes, src, bytes, kind);
  auto s = d.default_stream();
  queue_copy(*s, dst, src, bytes);
  s->synchronize();
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemsetAsync(void *dst, int value, size_t bytes, hpuStream_t stream) {
  HPU_API_BEGIN
  if (bytes == 0) return HPU_SUCCESS;
  Device &d = set_device(dst, bytes, value);
  queue_set(*stream_from_handle(stream, &d), dst, value, bytes);
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemset(void *dst, int value, size_t bytes) {
  HPU_API_BEGIN
  if (bytes == 0) return HPU_SUCCESS;
  auto s = set_device(dst, bytes, value).default_stream();
  queue_set(*s, dst, value, bytes);
  s->synchronize();
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemGetInfo(hpuDevice_t dev, size_t *free_bytes, size_t *total_bytes) {
  HPU_API_BEGIN
  Device &d = device_from_handle(dev);
  HPU_CHECK_ARG(free_bytes != nullptr, "free_bytes is NULL");
  HPU_CHECK_ARG(total_bytes != nullptr, "total_bytes is NULL");
  MemStats s = d.stats();
  *free_bytes = s.limit - s.in_use;
  *total_bytes = s.limit;
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemEmptyCache(hpuDevice_t dev) {
  HPU_API_BEGIN
  Device &d = device_from_handle(dev);
  d.collect_deferred();
  d.allocator().empty_cache();
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemStats(hpuDevice_t dev, hpuMemStats_t *stats) {
  HPU_API_BEGIN
  api::copy_sized(stats, public_stats(dev), "stats");
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemStatsJson(hpuDevice_t dev, char **json) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(json != nullptr, "json is NULL");
  hpuMemStats_t s = public_stats(dev);
  const std::pair<const char *, json_int_t> figures[] = {
      {"Limit", static_cast<json_int_t>(s.limit)},
      {"InUse", static_cast<json_int_t>(s.in_use)},
      {"MaxInUse", static_cast<json_int_t>(s.max_in_use)},
      {"NumAllocs", static_cast<json_int_t>(s.num_allocs)},
      {"NumFrees", static_cast<json_int_t>(s.num_frees)},
      {"ActiveAllocs", s.active_allocs},
      {"MaxAllocSize", static_cast<json_int_t>(s.max_alloc_size)},
      {"TotalSystemAllocs", static_cast<json_int_t>(s.total_system_allocs)},
      {"TotalSystemFrees", static_cast<json_int_t>(s.total_system_frees)},
      {"TotalActiveAllocs", s.total_active_allocs},
      {"ReservedBytes", static_cast<json_int_t>(s.reserved_bytes)},
      {"SegmentAllocs", static_cast<json_int_t>(s.segment_allocs)},
      {"SegmentFrees", static_cast<json_int_t>(s.segment_frees)},
  };
  json_t *obj = json_object();
  if (!obj) throw std::bad_alloc();
  for (const auto &f : figures) json_object_set_new(obj, f.first, json_integer(f.second));
  char *text = json_dumps(obj, JSON_PRESERVE_ORDER);
  json_decref(obj);
  if (!text) throw std::bad_alloc();
  *json = text;
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemResetPeakStats(hpuDevice_t dev) {
  HPU_API_BEGIN
  device_from_handle(dev).allocator().reset_peak();
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemResetAccumulatedStats(hpuDevice_t dev) {
  HPU_API_BEGIN
  Device &d = device_from_handle(dev);
  d.collect_deferred();
  d.allocator().reset_accumulated();
  HPU_API_END
}

}  // extern "C"
