// The dissemination barrier: in round k rank r signals r + 2^k and waits for
// r - 2^k. After ceil(log2(n)) rounds every rank has heard, directly or not,
// from every other, so none leaves before all have arrived.
#include "comm/algorithm.hpp"

namespace hpu::comm {

void dissemination_barrier(Ctx &c) {
  const int n = c.size(), r = c.rank();
  uint32_t round = 0;
  for (int dist = 1; dist < n; dist <<= 1, ++round) {
    auto s = c.send(mod(r + dist, n), round, nullptr, 0);
    auto q = c.recv(mod(r - dist, n), round, nullptr, 0);
    c.wait({s.get(), q.get()});
  }
}

}  // namespace hpu::comm
