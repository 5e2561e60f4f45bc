// Choosing the transport of a new endpoint.
#pragma once

#include <memory>
#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/transport.hpp"

namespace hpu::comm {

// This rank's transport endpoint: exchanges addresses through `bootstrap` and
// picks the transport per peer by locality; `forced` (HPU_TRANSPORT, "" = pick)
// names one. Throws HPU_ERROR_NOT_AVAILABLE when a forced or needed transport
// is not available (naming it), HPU_ERROR_CONFIG for an unknown name.
std::shared_ptr<Transport> make_transport(Bootstrap &bootstrap, const Locality &self, const std::string &forced,
                                          Deadline deadline);

}  // namespace hpu::comm
