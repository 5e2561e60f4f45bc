// Choosing the transport of a new endpoint: one table of the transports, most
// preferred first (as NCCL's ncclTransports[]); for each pair of ranks the
// first that connects them carries their messages (select.cpp).
#pragma once

#include <memory>
#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/transports/transport.hpp"

namespace hpu::comm {

// This rank's transport endpoint: exchanges addresses through `bootstrap` and
// picks the transport per peer by locality; `forced` (HPU_TRANSPORT, "" = pick)
// names one. Throws HPU_ERROR_NOT_AVAILABLE when a forced or needed transport
// is not available (naming it), HPU_ERROR_CONFIG for an unknown name.
std::shared_ptr<Transport> make_transport(Bootstrap &bootstrap, const Locality &self, const std::string &forced,
                                          Deadline deadline);

// The transport for a group some of whose ranks live in other processes: per
// peer the first of shm, verbs and tcp that connects the pair; `forced`
// ("shm", "tcp" or "verbs") uses one for every peer. Collective over the
// bootstrap. Logs the choice.
std::unique_ptr<Transport> make_net_transport(Bootstrap &bootstrap, const Locality &self, const std::string &forced,
                                              Deadline deadline);

// Whether `name` is a transport of the table; the names, in alphabetical
// order, joined by ", " (the last by `last`, e.g. " or ").
bool transport_known(const std::string &name);
std::string transport_names(const char *last);

}  // namespace hpu::comm
