// HPU_FAULT_INJECT's transport faults (see core/fault.hpp, hpu(7)) for the
// process transports: an Engine around the real one whose links, on the ranks
// fault_rank selects (default every rank),
//   conn_drop_after_bytes=N  drop the connection once N bytes (frames and
//                            payloads) were sent on it: the endpoint fails with
//                            HPU_ERROR_REMOTE, the message names the fault;
//                            only ERROR and BYE frames still pass, so peers
//                            learn of it as they would from a closed socket
//   peer_delay_ms=N          wait N ms before each send
//   peer_stall=1             send nothing any more (sends never complete)
#pragma once

#include <memory>

#include "comm/transports/net/transport.hpp"

namespace hpu::comm {

// True when HPU_FAULT_INJECT names a transport fault, for any rank.
bool transport_faults_injected();

// `engine` itself when no transport fault applies to this rank.
std::unique_ptr<Engine> wrap_faulty_engine(NetTransport &t, std::unique_ptr<Engine> engine);

}  // namespace hpu::comm
