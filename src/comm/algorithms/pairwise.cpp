// All-to-all by direct exchange: each rank posts its n - 1 sends and receives
// at once (rank r sends to r + k while it receives from r - k), so every pair
// moves its block in one message.
#include <cstring>

#include "comm/algorithm.hpp"

namespace hpu::comm {

void pairwise_alltoall(Ctx &c, const void *send, void *recv, size_t bytes_per_rank) {
  const int n = c.size(), r = c.rank();
  const size_t b = bytes_per_rank;
  const char *src = static_cast<const char *>(send);
  if (send == recv) {  // in place: peers read the blocks from a copy
    char *copy = static_cast<char *>(c.scratch(0, b * static_cast<size_t>(n)));
    std::memcpy(copy, send, b * static_cast<size_t>(n));
    src = copy;
  }
  auto *out = static_cast<char *>(recv);
  std::vector<RequestPtr> all;
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    all.push_back(c.recv(from, 0, out + static_cast<size_t>(from) * b, b));
    all.push_back(c.send(to, 0, src + static_cast<size_t>(to) * b, b));
  }
  if (src + static_cast<size_t>(r) * b != out + static_cast<size_t>(r) * b)
    std::memcpy(out + static_cast<size_t>(r) * b, src + static_cast<size_t>(r) * b, b);
  c.wait(all);
}

}  // namespace hpu::comm
