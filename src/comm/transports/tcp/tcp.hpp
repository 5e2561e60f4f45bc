// tcp: the net transport's kind for ranks on other hosts, over libuv sockets
// (link.cpp).
#pragma once

#include <memory>
#include <vector>

#include "comm/transports/net/placement.hpp"
#include "comm/transports/net/transport.hpp"

namespace hpu::comm {

// The links to `peers`. Collective over the bootstrap: every rank calls it,
// with or without peers of its own.
std::unique_ptr<Engine> make_tcp_engine(NetTransport &t, Bootstrap &bootstrap, const Placement &place,
                                        const std::vector<int> &peers, Deadline deadline);

}  // namespace hpu::comm
