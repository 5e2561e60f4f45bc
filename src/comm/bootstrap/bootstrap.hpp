// The bootstrap: how the ranks of a new communicator find each other. It only
// exchanges small records (where each rank lives, the transports' addresses);
// data never goes through it. As in NCCL, the unique id names the group: a
// random secret, and for groups that span processes the address of the
// rendezvous (root) listener.
//
//   hpuGetUniqueId     -> UniqueId::make(), socket_root_start    (socket.hpp)
//   hpuCommInitRank    -> bootstrap_connect(id, rank, nranks)     (connect.hpp)
//                      -> make_transport(bootstrap, ...)          (transports/select.hpp)
//
// This file: the id, where a rank runs, and the interface every bootstrap
// implements. The bootstraps: local.hpp (ranks that are threads of one
// process) and socket.hpp (a root listener named by the id's address);
// connect.hpp picks one by the id; launch_env.hpp derives the id from a
// launcher's environment.
#pragma once

#include <hpu/comm.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/deadline.hpp"

namespace hpu::comm {

// The bytes of hpuUniqueId_t (fixed layout; travels between processes as is).
struct UniqueId {
  static constexpr uint64_t kMagic = 0x0164692d75706800ull;  // "\0hpu-id\1"
  static constexpr uint32_t kVersion = 1;

  uint64_t magic = 0;
  uint32_t version = 0;
  uint32_t flags = 0;      // kHasAddress when `address` names a rendezvous listener
  uint8_t secret[16] = {};  // random; peers must present it
  // The rendezvous listener for groups across processes: a sockaddr_in or
  // sockaddr_in6 (family 0 = none: the group lives in one process).
  uint8_t address[64] = {};
  uint8_t reserved[32] = {};

  static constexpr uint32_t kHasAddress = 1;

  // A fresh id with a random secret (getrandom).
  static UniqueId make();
  // Reads the caller's bytes; throws HPU_ERROR_INVALID_ARGUMENT naming `what`
  // when the magic or version is wrong (not an id, or from another release).
  static UniqueId from(const hpuUniqueId_t &id, const char *what);
  hpuUniqueId_t to_public() const;
  // Hex of the first secret bytes, for logs (never the whole secret).
  std::string short_name() const;
};
static_assert(sizeof(UniqueId) == HPU_UNIQUE_ID_BYTES, "UniqueId fills hpuUniqueId_t");

// Fills `out` from the system's random source (getrandom); HPU_ERROR_IO if it fails.
void random_bytes(void *out, size_t n);

// Where a rank runs: transports use it to pick by locality (same process:
// local; same host: shm; else tcp).
struct Locality {
  uint64_t host = 0;     // hash of the machine id and boot id
  uint64_t process = 0;  // random per process (pids repeat across hosts and namespaces)
  int32_t pid = 0;
  int32_t device = -1;   // device ordinal in its process
};
Locality this_process(int device);

class Bootstrap {
 public:
  Bootstrap(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~Bootstrap() = default;
  Bootstrap(const Bootstrap &) = delete;
  Bootstrap &operator=(const Bootstrap &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Every rank gives `bytes` bytes (the same size on every rank); `all` receives
  // size() * bytes, rank r's at r * bytes. Collective: every rank calls it in
  // the same order. Throws HPU_ERROR_TIMEOUT at the deadline naming the ranks
  // that did not arrive, HPU_ERROR_ABORTED after abort(), HPU_ERROR_INVALID_USAGE
  // when ranks disagree (sizes, rank count, a rank joined twice).
  virtual void allgather(const void *mine, size_t bytes, void *all, Deadline deadline) = 0;
  // Wakes every waiter of this rank with HPU_ERROR_ABORTED. Any thread.
  virtual void abort() = 0;

  template <class T>
  std::vector<T> allgather(const T &mine, Deadline deadline) {
    std::vector<T> all(static_cast<size_t>(size_));
    allgather(&mine, sizeof(T), all.data(), deadline);
    return all;
  }

 private:
  const int rank_, size_;
};

}  // namespace hpu::comm
