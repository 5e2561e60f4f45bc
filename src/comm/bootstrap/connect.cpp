// Joining a group: the bootstrap the id names.
#include "comm/bootstrap/connect.hpp"

#include "comm/bootstrap/local.hpp"
#include "comm/bootstrap/socket.hpp"
#include "core/log.hpp"

namespace hpu::comm {

std::unique_ptr<Bootstrap> bootstrap_connect(const UniqueId &id, int rank, int nranks, Deadline deadline) {
  if (id.flags & UniqueId::kHasAddress) return socket_bootstrap(id, rank, nranks, deadline);
  auto b = local_bootstrap(id, rank, nranks);
  HPU_LOG(debug, "comm", "rank %d of %d joining group %s (local bootstrap)", rank, nranks, id.short_name().c_str());
  // Everyone present: the first exchange doubles as the join barrier.
  char nothing = 0;
  std::vector<char> all(static_cast<size_t>(nranks));
  b->allgather(&nothing, 1, all.data(), deadline);
  return b;
}

}  // namespace hpu::comm
