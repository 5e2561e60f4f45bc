// Picks the transport of a new endpoint by where its peers run.
#include "comm/transports/select.hpp"
#include "comm/transports/local.hpp"
#include "comm/transports/net_transport.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace hpu::comm {

std::shared_ptr<Transport> make_transport(Bootstrap &bootstrap, const Locality &self, const std::string &forced,
                                          Deadline deadline) {
  auto where = bootstrap.allgather(self, deadline);
  // Every rank sees the same localities, so every rank takes the same branch.
  bool all_here = forced.empty() || forced == "local";
  for (int r = 0; r < bootstrap.size(); ++r) all_here = all_here && where[static_cast<size_t>(r)].process == self.process;
  if (!all_here) {
    if (forced == "local")
      fail(HPU_ERROR_NOT_AVAILABLE, "transport \"local\" (HPU_TRANSPORT) connects the ranks of one process only");
    return make_net_transport(bootstrap, self, forced, deadline);
  }
  HPU_LOG(debug, "comm", "rank %d of %d: transport local", bootstrap.rank(), bootstrap.size());
  return make_local_transport(bootstrap, deadline);
}

}  // namespace hpu::comm
