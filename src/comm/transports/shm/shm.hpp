// shm: the net transport's kind for ranks of one host, over POSIX shared
// memory (link.cpp).
#pragma once

#include <memory>
#include <vector>

#include "comm/transports/net/placement.hpp"
#include "comm/transports/net/transport.hpp"

namespace hpu::comm {

// The links to `peers` (all on this host). Collective over the bootstrap:
// every rank calls it, with or without peers of its own.
std::unique_ptr<Engine> make_shm_engine(NetTransport &t, Bootstrap &bootstrap, const Placement &place,
                                        const std::vector<int> &peers, Deadline deadline);

}  // namespace hpu::comm
