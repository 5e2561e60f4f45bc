// The local transport: ranks that are threads of one process. Zero-copy: a
// message moves with one copy (or one combine) straight from the sender's
// memory into the receiver's, done by whichever of the two posts second, so
// no staging buffer and no helper thread exist.
#pragma once

#include <memory>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/transports/transport.hpp"

namespace hpu::comm {

// Every rank of the group must be in this process (make_transport checks).
std::shared_ptr<Transport> make_local_transport(Bootstrap &bootstrap, Deadline deadline);

}  // namespace hpu::comm
