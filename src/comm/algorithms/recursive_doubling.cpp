// Recursive doubling: in round k every rank swaps its whole current value with
// the rank whose (virtual) number differs in bit k and combines the two, lower
// ranks' value first, so both partners hold the same bits afterwards. log2(n)
// rounds of latency: the algorithm for small messages. With n not a power of
// two, the first 2 * (n - p) ranks pair up first (the even one hands its value
// to the odd one) and get the result back at the end.
//
// The exchange computes the same bits in one round of messages: every rank
// sends its value to every peer and combines all n values itself, in the
// order recursive doubling combines them. Each round of recursive doubling
// waits for the partner to run; when ranks outnumber CPUs that is a context
// switch per round, while here a rank that runs sends all it has and takes
// whatever has arrived.
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

void exchange_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * dtype_bytes(dtype);
  // value[k]: rank k's input, then the combination of a block of ranks that
  // starts at k (in scratch, k's own region; its input stays where it is).
  auto *all = static_cast<char *>(c.scratch(0, bytes * static_cast<size_t>(n)));
  std::vector<const char *> value(static_cast<size_t>(n));
  std::vector<RequestPtr> reqs;
  for (int k = 1; k < n; ++k) {
    const int from = mod(r - k, n);
    value[static_cast<size_t>(from)] = all + static_cast<size_t>(from) * bytes;
    reqs.push_back(c.recv(from, 0, all + static_cast<size_t>(from) * bytes, bytes));
  }
  for (int k = 1; k < n; ++k) reqs.push_back(c.send(mod(r + k, n), 0, send, bytes));
  value[static_cast<size_t>(r)] = static_cast<const char *>(send);
  c.wait(reqs);  // every send done too: recv may be send

  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  const int extra = n - p2;
  const Combine combine = make_combine(dtype, op, nullptr, /*local_first=*/true);  // out = op(local, in)
  // out = op(value[a], value[b]) into a's region, or into recv for the last one.
  auto combine_into = [&](int a, int b, bool last) {
    char *out = last ? static_cast<char *>(recv) : all + static_cast<size_t>(a) * bytes;
    combine.fn(out, value[static_cast<size_t>(b)], value[static_cast<size_t>(a)], count, combine.ctx);
    value[static_cast<size_t>(a)] = out;
  };
  // Virtual rank v holds op(rank 2v, rank 2v + 1) for v < extra (kept in
  // rank 2v's region here), else rank v + extra's value; block pairs of
  // virtual ranks combine lower first, as the partners of each round of
  // recursive doubling do.
  auto rank_of = [&](int v) { return v < extra ? 2 * v : v + extra; };
  for (int v = 0; v < extra; ++v) combine_into(2 * v, 2 * v + 1, false);
  for (int mask = 1; mask < p2; mask <<= 1)
    for (int v = 0; v < p2; v += 2 * mask) combine_into(rank_of(v), rank_of(v + mask), mask * 2 >= p2);
  finish_average(recv, count, dtype, op, n);
}

}  // namespace hpu::comm
