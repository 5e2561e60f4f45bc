// The bootstrap of ranks that are threads of one process: they meet in a
// process-wide table keyed by the id's secret.
#pragma once

#include <memory>

#include "comm/bootstrap/bootstrap.hpp"

namespace hpu::comm {

// Joins the group of `id` as `rank` of `nranks` (returns at once; the first
// allgather waits for the others). Throws HPU_ERROR_INVALID_USAGE when the rank
// has already joined or the ranks disagree on nranks.
std::unique_ptr<Bootstrap> local_bootstrap(const UniqueId &id, int rank, int nranks);

}  // namespace hpu::comm
