// hpuGroupStart/hpuGroupEnd: per thread, calls between them are checked at
// once and recorded; the outermost end issues them in call order, all the
// sends and receives of one (communicator, stream) as one operation placed
// where the first of them was called.
#pragma once

#include <memory>

#include "comm/communicator.hpp"

namespace hpu::comm {

bool in_group();
void group_start();
// Issues what was recorded; throws the first failure after issuing the rest.
void group_end();

// Queues a collective now (Communicator::enqueue), or records it when a group is open.
void issue_or_record(std::shared_ptr<Communicator> comm, std::shared_ptr<Stream> stream, const OpHeader &header,
                     const void *send, void *recv);
// Queues one send or receive now, or records it when a group is open.
void issue_or_record_p2p(std::shared_ptr<Communicator> comm, std::shared_ptr<Stream> stream, P2POp op);

}  // namespace hpu::comm
