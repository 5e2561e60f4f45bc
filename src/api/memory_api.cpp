// Device memory at the C boundary.
#include <jansson.h>
#include <sys/mman.h>
#include <unistd.h>

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

// The two sides of a copy: the live allocation holding each device side.
struct CopySides {
  DeviceMemory dst{}, src{};
  bool dst_dev, src_dev;
  // The device whose stream runs the copy by default.
  Device &device() const { return *(dst_dev ? dst.device : src.device); }
};

// Checks a copy's pointers against its kind (dst_bytes from dst, src_bytes
// from src): each device side lies in a live allocation, no host side is
// device memory.
CopySides copy_sides(void *dst, size_t dst_bytes, const void *src, size_t src_bytes, hpuMemcpyKind_t kind) {
  HPU_CHECK_ARG(kind == HPU_MEMCPY_HOST_TO_DEVICE || kind == HPU_MEMCPY_DEVICE_TO_HOST ||
                    kind == HPU_MEMCPY_DEVICE_TO_DEVICE,
                "kind %d is not an hpuMemcpyKind_t", static_cast<int>(kind));
  HPU_CHECK_ARG(dst != nullptr, "dst is NULL");
  HPU_CHECK_ARG(src != nullptr, "src is NULL");
  CopySides c;
  c.dst_dev = kind != HPU_MEMCPY_DEVICE_TO_HOST;
  c.src_dev = kind != HPU_MEMCPY_HOST_TO_DEVICE;
  const bool dst_in = in_device_segment(dst), src_in = in_device_segment(src);
  if (c.dst_dev && !dst_in)
    fail(HPU_ERROR_INVALID_HANDLE, "dst %p (+%zu bytes) is not device memory, as %s requires", dst, dst_bytes,
         kind_name(kind));
  if (c.src_dev && !src_in)
    fail(HPU_ERROR_INVALID_HANDLE, "src %p (+%zu bytes) is not device memory, as %s requires", src, src_bytes,
         kind_name(kind));
  if (!c.dst_dev && dst_in)
    fail(HPU_ERROR_INVALID_ARGUMENT, "dst %p is device memory but kind is %s; use HPU_MEMCPY_DEVICE_TO_DEVICE",
         dst, kind_name(kind));
  if (!c.src_dev && src_in)
    fail(HPU_ERROR_INVALID_ARGUMENT, "src %p is device memory but kind is %s; use HPU_MEMCPY_DEVICE_TO_DEVICE",
         src, kind_name(kind));
  if (c.dst_dev) c.dst = device_memory(dst, dst_bytes, "dst");
  if (c.src_dev) c.src = device_memory(src, src_bytes, "src");
  return c;
}

Device &set_device(void *dst, size_t bytes, int value) {
  HPU_CHECK_ARG(dst != nullptr, "dst is NULL");
  HPU_CHECK_ARG(value >= 0 && value <= 255, "value %d is not a byte (0..255)", value);
  return *device_memory(dst, bytes, "dst").device;
}

// True when every page of [begin, end) is mapped in this process: msync()
// looks the range up in the process's mappings and touches no page.
bool host_mapped(uintptr_t begin, uintptr_t end) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  begin &= ~(page - 1);
  return msync(reinterpret_cast<void *>(begin), end - begin, MS_ASYNC) == 0;
}

// Checks the rows a gather reads against src: inside src's allocation when
// src is device memory; in memory mapped by this process when it is host
// memory (all of src's buffer is, so a row number that is not is wrong).
void check_rows(const CopySides &c, const void *src, size_t row_bytes, const int64_t *rows, size_t count) {
  size_t lo = 0, hi = 0;  // positions of the lowest and the highest row
  for (size_t i = 0; i < count; ++i) {
    HPU_CHECK_ARG(rows[i] >= 0, "rows[%zu] is %lld; row numbers are >= 0", i, static_cast<long long>(rows[i]));
    if (rows[i] < rows[lo]) lo = i;
    if (rows[i] > rows[hi]) hi = i;
  }
  const auto top = static_cast<uint64_t>(rows[hi]);
  const uintptr_t from = reinterpret_cast<uintptr_t>(src);
  if (c.src_dev) {
    const size_t holds = (c.src.base + c.src.bytes - from) / row_bytes;  // >= 1: src holds a row
    HPU_CHECK_ARG(top < holds, "rows[%zu] is %lld, but src %p holds %zu row%s of row_bytes %zu (in its %zu-byte "
                  "allocation at %p)", hi, static_cast<long long>(rows[hi]), src, holds, holds == 1 ? "" : "s",
                  row_bytes, c.src.bytes, reinterpret_cast<void *>(c.src.base));
    return;
  }
  HPU_CHECK_ARG(top < SIZE_MAX / row_bytes && (top + 1) * row_bytes <= UINTPTR_MAX - from,
                "rows[%zu] is %lld; that row of row_bytes %zu is past the end of the address space", hi,
                static_cast<long long>(rows[hi]), row_bytes);
  auto row_start = [&](size_t i) { return from + static_cast<uintptr_t>(rows[i]) * row_bytes; };
  if (host_mapped(row_start(lo), row_start(hi) + row_bytes)) return;
  for (size_t i : {hi, lo})
    HPU_CHECK_ARG(host_mapped(row_start(i), row_start(i) + row_bytes),
                  "rows[%zu] is %lld; that row of row_bytes %zu, at %p, is not memory of this process", i,
                  static_cast<long long>(rows[i]), row_bytes, reinterpret_cast<void *>(row_start(i)));
  fail(HPU_ERROR_INVALID_ARGUMENT, "rows[%zu] is %lld and rows[%zu] is %lld; the memory between those rows of "
       "row_bytes %zu is not all memory of this process", lo, static_cast<long long>(rows[lo]), hi,
       static_cast<long long>(rows[hi]), row_bytes);
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
  *ptr = bytes == 0 ? nullptr : d.allocate(bytes, dev);
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemFree(void *ptr) {
  HPU_API_BEGIN
  if (ptr == nullptr) return HPU_SUCCESS;
  // The allocation names its device: the segment holding ptr belongs to one,
  // whose allocator refuses anything but a live allocation's start.
  SegmentInfo s;
  if (!segment_of(ptr, 1, &s)) fail(HPU_ERROR_INVALID_HANDLE, "ptr %p is not device memory (from hpuMemAlloc)", ptr);
  s.device->free(ptr);
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemcpyAsync(hpuStream_t stream, void *dst, const void *src, size_t bytes, hpuMemcpyKind_t kind) {
  HPU_API_BEGIN
  if (bytes == 0) return HPU_SUCCESS;
  Device &d = copy_sides(dst, bytes, src, bytes, kind).device();
  queue_copy(*stream_from_handle(stream, &d), dst, src, bytes);
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemcpyRowsAsync(hpuStream_t stream, void *dst, const void *src, size_t row_bytes,
                                       const int64_t *rows, size_t count, hpuMemcpyKind_t kind) {
  HPU_API_BEGIN
  if (count == 0 || row_bytes == 0) return HPU_SUCCESS;
  HPU_CHECK_ARG(count <= SIZE_MAX / row_bytes, "count %zu rows of row_bytes %zu overflow size_t", count, row_bytes);
  // All of dst is checked before rows is read, and src's first row.
  CopySides c = copy_sides(dst, count * row_bytes, src, row_bytes, kind);
  HPU_CHECK_ARG(rows != nullptr, "rows is NULL");
  check_rows(c, src, row_bytes, rows, count);
  queue_rows(*stream_from_handle(stream, &c.device()), dst, src, row_bytes, std::vector<int64_t>(rows, rows + count));
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemcpy(void *dst, const void *src, size_t bytes, hpuMemcpyKind_t kind) {
  HPU_API_BEGIN
  if (bytes == 0) return HPU_SUCCESS;
  auto s = copy_sides(dst, bytes, src, bytes, kind).device().default_stream();
  queue_copy(*s, dst, src, bytes);
  s->synchronize();
  HPU_API_END
}

HPU_API hpuStatus_t hpuMemsetAsync(hpuStream_t stream, void *dst, int value, size_t bytes) {
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
