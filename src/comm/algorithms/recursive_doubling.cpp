// Recursive doubling: in round k every rank swaps its whole current value with
// the rank whose (virtual) number differs in bit k and combines the two, lower
// ranks' value first, so both partners hold the same bits afterwards. log2(n)
// rounds of latency: the algorithm for small messages. With n not a power of
// two, the first 2 * (n - p) ranks pair up first (the even one hands its value
// to the odd one) and get the result back at the end.
#include <cstring>

#include "comm/algorithm.hpp"

namespace hpu::comm {

void recursive_doubling_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype,
                                  hpuRedOp_t op) {
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * dtype_bytes(dtype);
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  const int extra = n - p2;
  constexpr uint32_t kResult = 1000;  // the step of the result handed back to a folded rank

  if (r < 2 * extra && r % 2 == 0) {  // folded: hand the value over, get the result back
    auto s = c.send(r + 1, 0, send, bytes);
    auto q = c.recv(r + 1, kResult, recv, bytes);
    c.wait({s.get(), q.get()});
    return;
  }
  char *buf[2] = {static_cast<char *>(c.scratch(0, bytes)), static_cast<char *>(c.scratch(1, bytes))};
  int next = 0;  // the buffer the next combine writes
  const char *cur = static_cast<const char *>(send);
  if (r < 2 * extra) {  // odd partner of a folded rank: its value comes first (lower rank)
    Combine cb = make_combine(dtype, op, cur);
    c.wait(c.recv(r - 1, 0, buf[next], bytes, &cb));
    cur = buf[next];
    next ^= 1;
  }
  const int vr = r < 2 * extra ? r / 2 : r - extra;
  for (int mask = 1, round = 1; mask < p2; mask <<= 1, ++round) {
    const int pv = vr ^ mask;
    const int peer = pv < extra ? 2 * pv + 1 : pv + extra;
    // The last round combines straight into recv, unless recv is the value
    // being sent (in place, first round), which a peer may still be reading.
    char *out = mask * 2 >= p2 && recv != cur ? static_cast<char *>(recv) : buf[next];
    Combine cb = make_combine(dtype, op, cur, /*local_first=*/vr < pv);
    auto s = c.send(peer, static_cast<uint32_t>(round), cur, bytes);
    auto q = c.recv(peer, static_cast<uint32_t>(round), out, bytes, &cb);
    c.wait({s.get(), q.get()});
    cur = out;
    next ^= 1;
  }
  if (cur != recv) std::memcpy(recv, cur, bytes);
  finish_average(recv, count, dtype, op, n);
  if (r < 2 * extra) c.wait(c.send(r - 1, kResult, recv, bytes));
}

}  // namespace hpu::comm
