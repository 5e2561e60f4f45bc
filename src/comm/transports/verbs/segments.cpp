// Binds the verbs registration cache to the device allocator's segments when
// libhpu loads (white-box tests of the transport, which do not build the
// device layer, set a lookup of their own).
#include "comm/transports/verbs/reg_cache.hpp"
#include "device/allocator.hpp"

namespace hpu::comm {

namespace {

bool device_segment(const void *ptr, size_t bytes, MemorySegment *out) {
  SegmentInfo s;
  if (!segment_of(ptr, bytes, &s)) return false;
  *out = {s.base, s.size, s.generation};
  return true;
}

const bool bound = (set_verbs_segment_lookup(device_segment), true);

}  // namespace

}  // namespace hpu::comm
