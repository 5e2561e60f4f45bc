// Where the ranks of a group that spans processes run, as every rank sees it
// after one exchange over the bootstrap: host and network namespace, process,
// the CPUs each may use, and the group's link secret. select.cpp picks each
// pair's kind by it; the engines read what they need (shm: the processes; tcp:
// the CPUs; both: the secret).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"

namespace hpu::comm {

struct Where {
  uint64_t host;   // machine and boot
  uint64_t netns;  // network namespace: separate namespaces count as separate hosts
  int32_t pid;
  int32_t cpu_count;     // CPUs this process may run on
  uint64_t cpu_bits[4];  // which, of the first 256
  uint8_t secret[16];    // rank 0's is the group's link secret
};

struct Placement {
  // Exchanges this rank's record (collective over the bootstrap).
  static Placement gather(Bootstrap &bootstrap, const Locality &self, Deadline deadline);

  int rank = 0, size = 0;
  std::vector<Where> where;  // per rank

  bool same_host(int i, int j) const;
  // The ranks on the host of rank r, r included.
  std::vector<int> on_host(int r) const;
  // The CPUs the ranks of `ranks` may use together (each may be pinned to a
  // few of them, as mpirun binds ranks).
  int cpus_together(const std::vector<int> &ranks) const;
  const uint8_t *secret() const { return where[0].secret; }
  std::vector<int32_t> pids() const;
};

}  // namespace hpu::comm
