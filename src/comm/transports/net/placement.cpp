#include "comm/transports/net/placement.hpp"

#include <sched.h>
#include <sys/stat.h>

#include <algorithm>

namespace hpu::comm {

namespace {

void cpus_of_process(Where &w) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    w.cpu_count = 1;
    return;
  }
  w.cpu_count = CPU_COUNT(&set);
  for (int c = 0; c < 256; ++c)
    if (CPU_ISSET(c, &set)) w.cpu_bits[c / 64] |= uint64_t(1) << (c % 64);
}

uint64_t netns_inode() {
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

}  // namespace

Placement Placement::gather(Bootstrap &bootstrap, const Locality &self, Deadline deadline) {
  Where me{};
  me.host = self.host;
  me.netns = netns_inode();
  me.pid = self.pid;
  cpus_of_process(me);
  random_bytes(me.secret, sizeof me.secret);
  Placement p;
  p.rank = bootstrap.rank();
  p.size = bootstrap.size();
  p.where = bootstrap.allgather(me, deadline);
  return p;
}

bool Placement::same_host(int i, int j) const {
  const Where &a = where[static_cast<size_t>(i)], &b = where[static_cast<size_t>(j)];
  return a.host == b.host && a.netns == b.netns;
}

std::vector<int> Placement::on_host(int r) const {
  std::vector<int> here;
  for (int j = 0; j < size; ++j)
    if (same_host(r, j)) here.push_back(j);
  return here;
}

int Placement::cpus_together(const std::vector<int> &ranks) const {
  uint64_t bits[4] = {0, 0, 0, 0};
  int most = 1;
  for (int r : ranks) {
    for (int i = 0; i < 4; ++i) bits[i] |= where[static_cast<size_t>(r)].cpu_bits[i];
    most = std::max(most, static_cast<int>(where[static_cast<size_t>(r)].cpu_count));
  }
  int n = 0;
  for (uint64_t b : bits) n += __builtin_popcountll(b);
  return std::max(n, most);
}

std::vector<int32_t> Placement::pids() const {
  std::vector<int32_t> pids;
  for (const Where &w : where) pids.push_back(w.pid);
  return pids;
}

}  // namespace hpu::comm
