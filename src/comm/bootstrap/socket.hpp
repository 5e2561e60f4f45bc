// The bootstrap across processes and hosts. As in NCCL, the unique id names a
// root listener (address + random secret). Every rank connects to the root,
// proves it knows the secret (socket/handshake.hpp) and says which rank of
// how many it is; the root then serves the group's allgathers as a star: each
// rank sends its record, the root sends the concatenation back once all have.
//
// Faults: a rank whose connection closes without saying goodbye makes the root
// tell every other rank (HPU_ERROR_REMOTE naming it) and stop; a dead root
// closes every rank's connection (HPU_ERROR_REMOTE); a stopped one leaves the
// ranks to their deadline (HPU_ERROR_TIMEOUT). Strangers are dropped and logged.
#pragma once

#include <atomic>
#include <memory>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/socket/fd.hpp"

namespace hpu::comm {

// Starts a root listener in this process for the group `id` names: binds `at`
// (nullptr: default_interface_address(), any port), writes the bound address
// into id.address and sets UniqueId::kHasAddress. The root serves one group
// and stops, closing its sockets and ending its thread, when all its ranks
// have left, when a rank leaves before all have joined (its init failed), when
// the id expires (HPU_COMM_TIMEOUT after it was made or after the last rank
// joined, with ranks missing), or at exit. A taken port throws
// HPU_ERROR_ADDRESS_IN_USE naming `what` and the address.
void socket_root_start(UniqueId &id, const Address *at = nullptr, const char *what = "rendezvous listener");

// Joins the group as `rank` of `nranks` through the root named by the id;
// returns once every rank has joined (or throws like Bootstrap::allgather).
// The root may start later than this rank, up to the deadline.
std::unique_ptr<Bootstrap> socket_bootstrap(const UniqueId &id, int rank, int nranks, Deadline deadline);

class SocketBootstrap final : public Bootstrap {
 public:
  SocketBootstrap(const UniqueId &id, int rank, int nranks);
  ~SocketBootstrap() override;

  void join(Deadline deadline);
  void allgather(const void *mine, size_t bytes, void *all, Deadline deadline) override;
  void abort() override;

  // The local address of the connection to the root: the interface this host
  // uses for the job (transports listen there).
  const Address &local_address() const { return local_; }
  const UniqueId &id() const { return id_; }

  // The connection to the root. Between exchanges it becomes readable only
  // when the root reports that the group failed (a rank died or left) or the
  // root is gone: then fail_from_root() throws that failure (HPU_ERROR_REMOTE
  // naming the rank, or HPU_ERROR_INVALID_USAGE). Lets a rank waiting on its
  // peers outside the bootstrap, such as a transport accepting connections,
  // hear of a dead peer at once.
  int root_fd() const { return fd_.get(); }
  [[noreturn]] void fail_from_root(Deadline deadline);

 private:
  [[noreturn]] void raise_root_error(uint32_t bytes, Deadline deadline, const std::string &what);

  UniqueId id_;
  Fd fd_;
  Address local_;
  uint64_t round_ = 0;
  std::atomic<bool> aborted_{false};
};

}  // namespace hpu::comm
