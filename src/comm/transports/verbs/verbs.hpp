// verbs: the net transport's kind for ranks on hosts with RDMA ports: links
// over RDMA RC queue
// pairs, and the probe that decides whether verbs can be used. Both are
// collective over the bootstrap: every rank calls them.
#pragma once

#include <memory>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/transports/net/transport.hpp"
#include "core/config.hpp"

namespace hpu::comm {

// Whether each rank has an active RDMA port (through the libibverbs
// cfg.library names, on a device cfg.hca allows). `wanted`: this rank has peers on
// other hosts (else it does not probe, and counts as having none). `forced`:
// HPU_TRANSPORT=verbs: a rank without a port fails with HPU_ERROR_NOT_AVAILABLE
// and the reason. Unforced, a rank that wanted verbs and has no port logs why
// (info: "verbs not used, tcp between hosts: no RDMA device found ...").
// An HPU_IB_GID_INDEX a port lacks fails every rank with HPU_ERROR_CONFIG.
std::vector<char> verbs_ports(Bootstrap &bootstrap, bool wanted, bool forced, const IbConfig &cfg, Deadline deadline);

// The links to `peers` over RDMA (peers may be empty on some ranks). Frames
// travel as RDMA writes into registered receive slots; the eager limit to
// pass to add_engine is at most kVerbsMaxPayload.
constexpr size_t kVerbsMaxPayload = 64 << 10;
std::unique_ptr<Engine> make_verbs_engine(NetTransport &t, Bootstrap &bootstrap, const std::vector<int> &peers,
                                          const IbConfig &cfg, Deadline deadline);

// What an engine of make_verbs_engine has moved, for tests and the log.
struct VerbsStats {
  int ports = 0, lanes = 0;          // ports used, queue pairs per peer
  uint64_t direct_bytes = 0;         // written straight into receivers' buffers (zero copy)...
  uint64_t direct_copied_bytes = 0;  // ...of which from a send buffer the cache could not register (one copy)
  uint64_t slot_bytes = 0;           // frames and their payloads through the receive slots
  uint64_t inline_sends = 0;         // writes posted inline
  uint64_t registrations = 0, cache_hits = 0, stale = 0;  // the registration cache's
};
VerbsStats verbs_stats(const Engine &engine);

}  // namespace hpu::comm
