// Picks the transport of a new endpoint by where its peers run.
#include "comm/bootstrap.hpp"
#include "comm/transports/local.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace hpu::comm {

std::shared_ptr<Transport> make_transport(Bootstrap &bootstrap, const Locality &self, const std::string &forced,
                                          Deadline deadline) {
  auto where = bootstrap.allgather(self, deadline);
  if (!forced.empty() && forced != "local")
    fail(HPU_ERROR_NOT_AVAILABLE, "transport \"%s\" (HPU_TRANSPORT) is not available in this build; it has: local",
         forced.c_str());
  for (int r = 0; r < bootstrap.size(); ++r)
    if (where[static_cast<size_t>(r)].process != self.process)
      fail(HPU_ERROR_NOT_AVAILABLE,
           "rank %d runs in another process (pid %d); this build connects the ranks of one process only", r,
           where[static_cast<size_t>(r)].pid);
  HPU_LOG(debug, "comm", "rank %d of %d: transport local", bootstrap.rank(), bootstrap.size());
  return make_local_transport(bootstrap, deadline);
}

}  // namespace hpu::comm
