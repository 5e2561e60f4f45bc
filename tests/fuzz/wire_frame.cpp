// Fuzz target: the collectives' wire protocol as a process transport receives
// it (comm/transports/net/transport.cpp). The input is what a peer (rank 1)
// sends to rank 0: 80-byte frames (EAGER, RTS, CTS, DATA, ERROR, BYE, junk
// types), each followed by its payload. They are checked and delivered exactly
// as the tcp and shm links do (frame_limit, data_target, on_frame) into a
// transport that has receives of small and large messages posted and a large
// send waiting for its clear-to-send. Anything may fail the transport, with a
// status; nothing may crash, write outside a buffer or leak.
#include <cstring>
#include <memory>
#include <vector>

#include "comm/transports/net/transport.hpp"
#include "core/error.hpp"

using namespace hpu::comm;

namespace {

// Rank 0's link to rank 1: what rank 0 sends (CTS, DATA) is counted and dropped.
struct SinkLink final : Link {
  void send(const Frame &, const void *, size_t, int, std::function<void(bool)> done) override {
    if (done) done(true);
  }
  size_t max_chunk() const override { return 64 << 10; }
  const char *kind() const override { return "fuzz"; }
};

struct SinkEngine final : Engine {
  SinkLink sink;
  Link *link(int) override { return &sink; }
  void start() override {}
  void quiesce() override {}
  void shutdown() override {}
};

size_t payload_bytes(const Frame &f) {
  return f.type == Frame::eager || f.type == Frame::data || f.type == Frame::error ? f.size : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  NetTransport t(0, 2);
  t.add_engine(std::make_unique<SinkEngine>(), {1}, 4096);
  std::vector<std::vector<uint8_t>> recv_bufs = {std::vector<uint8_t>(64), std::vector<uint8_t>(200000),
                                                 std::vector<uint8_t>(0)};
  std::vector<uint8_t> send_buf(100000, 7);
  std::vector<RequestPtr> reqs;
  try {
    for (size_t i = 0; i < recv_bufs.size(); ++i) {
      RecvDesc d;
      d.peer = 1;
      d.tag = i;
      d.data = recv_bufs[i].data();
      d.bytes = recv_bufs[i].size();
      reqs.push_back(t.irecv(d));
    }
    SendDesc s;
    s.peer = 1;
    s.tag = 5;
    s.data = send_buf.data();
    s.bytes = send_buf.size();
    reqs.push_back(t.isend(s));
  } catch (const hpu::Error &) {
    abort();  // nothing has arrived yet: posting cannot fail
  }
  size_t at = 0;
  std::vector<uint8_t> staging;
  while (size - at >= sizeof(Frame)) {
    Frame f;
    std::memcpy(&f, data + at, sizeof f);
    at += sizeof f;
    const size_t bytes = payload_bytes(f), limit = t.frame_limit(1, f);
    if (bytes > limit) {  // what a link does with an oversized frame
      t.fail_all(HPU_ERROR_REMOTE, "oversized frame");
      break;
    }
    if (bytes > size - at) break;  // the connection ends mid-payload
    void *target = f.type == Frame::data && bytes ? t.data_target(1, f) : nullptr;
    if (!target) {
      staging.assign(data + at, data + at + bytes);
      target = staging.data();
    } else {
      std::memcpy(target, data + at, bytes);
    }
    at += bytes;
    try {
      t.on_frame(1, f, bytes ? target : nullptr);
    } catch (const hpu::Error &) {
    }
  }
  t.on_link_closed(1, "the fuzz input ended");
  for (auto &r : reqs) {
    try {
      t.test(*r);
    } catch (const hpu::Error &) {
    }
  }
  return 0;
}
