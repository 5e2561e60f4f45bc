// The verbs engine (verbs_link.cpp): net-protocol links over RDMA RC queue
// pairs, and the probe that decides whether verbs can be used. Both are
// collective over the bootstrap: every rank calls them.
#pragma once

#include <memory>
#include <vector>

#include "comm/bootstrap.hpp"
#include "comm/transports/net_transport.hpp"

namespace hpu::comm {

// Whether each rank has an active RDMA port (through the table HPU_IB_ADAPTER
// selects, on a device HPU_IB_HCA allows). `wanted`: this rank has peers on
// other hosts (else it does not probe, and counts as having none). `forced`:
// HPU_TRANSPORT=verbs: a rank without a port fails with HPU_ERROR_NOT_AVAILABLE
// and the reason. Unforced, a rank that wanted verbs and has no port logs why
// (info: "verbs not used, tcp between hosts: no RDMA device found ...").
std::vector<char> verbs_ports(Bootstrap &bootstrap, bool wanted, bool forced, Deadline deadline);

// The links to `peers` over RDMA (peers may be empty on some ranks). Frames
// travel as SENDs into posted receive buffers; the eager limit to pass to
// add_engine is at most kVerbsMaxPayload.
constexpr size_t kVerbsMaxPayload = 64 << 10;
std::unique_ptr<Engine> make_verbs_engine(NetTransport &t, Bootstrap &bootstrap, const std::vector<int> &peers,
                                          Deadline deadline);

}  // namespace hpu::comm
