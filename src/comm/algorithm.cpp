// The context algorithms run in.
#include "comm/algorithm.hpp"

#include <new>

#include "core/error.hpp"

namespace hpu::comm {

void *Scratch::get(int slot, size_t bytes) {
  Block &b = slots_[slot];
  if (b.bytes < bytes) {
    size_t want = (bytes + 63) & ~size_t(63);
    b.mem.reset();
    b.mem.reset(std::aligned_alloc(64, want));
    if (!b.mem) throw std::bad_alloc();
    b.bytes = want;
  }
  return b.mem.get();
}

Ctx::Ctx(Transport &transport, const OpHeader &header, double timeout_seconds, Scratch &scratch)
    : t_(transport),
      chaining_(transport.find<Chaining>()),
      shared_(transport.find<SharedMemory>()),
      header_(header),
      rank_(transport.rank()),
      size_(transport.size()),
      timeout_(timeout_seconds),
      scratch_(scratch) {}

namespace {
uint64_t tag_of(uint64_t seq, uint32_t step) {
  if (step >= (1u << 24)) fail(HPU_ERROR_INTERNAL, "message step %u is out of range", step);
  return (seq << 24) | step;
}

bool any(const std::vector<Request *> &after) {
  for (Request *r : after)
    if (r) return true;
  return false;
}
}  // namespace

RequestPtr Ctx::send(int peer, uint32_t step, const void *data, size_t bytes, const std::vector<Request *> &after) {
  SendDesc d;
  d.peer = peer;
  d.tag = tag_of(header_.seq, step);
  d.data = data;
  d.bytes = bytes;
  if (header_sent_.empty()) header_sent_.assign(static_cast<size_t>(size_), false);
  if (!header_sent_[static_cast<size_t>(peer)]) {
    header_sent_[static_cast<size_t>(peer)] = true;
    d.header = &header_;
  }
  if (!any(after)) return t_.isend(d);
  if (chaining_) return chaining_->isend_after(d, after);
  t_.wait(after, deadline());
  return t_.isend(d);
}

RequestPtr Ctx::recv(int peer, uint32_t step, void *data, size_t bytes, const Combine *combine,
                     const std::vector<Request *> &after) {
  RecvDesc d;
  d.peer = peer;
  d.tag = tag_of(header_.seq, step);
  d.data = data;
  d.bytes = bytes;
  d.combine = combine;
  if (!any(after)) return t_.irecv(d);
  if (chaining_) return chaining_->irecv_after(d, after);
  t_.wait(after, deadline());
  return t_.irecv(d);
}

Deadline Ctx::deadline() const {
  return deadline_in(timeout_);
}

void Ctx::fail_all(hpuStatus_t status, const std::string &message) {
  t_.fail_all(status, message);
  t_.throw_if_failed();
  fail(status, "%s", message.c_str());  // not reached: fail_all made the error sticky
}

void Ctx::wait(std::initializer_list<Request *> requests) { t_.wait(requests, deadline()); }
void Ctx::wait(const std::vector<RequestPtr> &requests) { t_.wait(requests, deadline()); }

}  // namespace hpu::comm
