// Joining the group a unique id names, through the bootstrap the id calls for:
// the socket bootstrap when it names a rendezvous address, else the local one.
#pragma once

#include <memory>

#include "comm/bootstrap/bootstrap.hpp"

namespace hpu::comm {

// Joins the group named by `id` as `rank` of `nranks`. Blocks until every rank
// has joined, or throws as Bootstrap::allgather does.
std::unique_ptr<Bootstrap> bootstrap_connect(const UniqueId &id, int rank, int nranks, Deadline deadline);

}  // namespace hpu::comm
