// Recursive halving and doubling (Rabenseifner's allreduce): the buffer is cut
// into n blocks. In reduce-scatter round s, a rank and its partner (virtual
// rank xor n/2^(s+1)) each keep one half of the blocks they share, send the
// other half and combine the half they keep; after log2(n) rounds rank r holds
// block r complete. Allgather then doubles back in the reverse order. Each rank
// moves the ring's bytes (2 (n-1)/n of the buffer) in 2 log2(n) steps instead
// of 2 (n-1): fewer hand-offs between ranks, for large messages where ranks
// outnumber cores. With n not a power of two, the first 2 (n - p) ranks pair
// up first as in recursive doubling (the even one hands its value to the odd
// one and gets the result back at the end).
#include <cstring>

#include "comm/algorithm.hpp"

namespace hpu::comm {

void halving_doubling_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype,
                                hpuRedOp_t op) {
  const int n = c.size(), r = c.rank();
  const size_t esize = dtype_bytes(dtype), bytes = count * esize;
  int p2 = 1, rounds = 0;
  while (p2 * 2 <= n) {
    p2 *= 2;
    ++rounds;
  }
  const int extra = n - p2;
  constexpr uint32_t kFold = 1000, kResult = 1001;  // steps of the hand-over and the result handed back

  if (r < 2 * extra && r % 2 == 0) {  // folded: hand the value over, get the result back
    auto s = c.send(r + 1, kFold, send, bytes);
    auto q = c.recv(r + 1, kResult, recv, bytes);
    c.wait({s.get(), q.get()});
    return;
  }
  auto *out = static_cast<char *>(recv);
  const char *local = static_cast<const char *>(send);  // this rank's value, until round 0 has combined it
  if (r < 2 * extra) {  // odd partner of a folded rank: its value comes first (lower rank)
    Combine cb = make_combine(dtype, op, send);
    c.wait(c.recv(r - 1, kFold, out, bytes, &cb));
    local = out;
  }
  const int vr = r < 2 * extra ? r / 2 : r - extra;
  auto real = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  // Elements of blocks [b, b + m): blocks are the p2 near-equal pieces of count.
  auto blocks = [&](int b, int m) {
    const size_t begin = split(count, static_cast<size_t>(p2), static_cast<size_t>(b)).begin;
    const size_t end = b + m == p2 ? count : split(count, static_cast<size_t>(p2), static_cast<size_t>(b + m)).begin;
    return Piece{begin, end - begin};
  };
  // The blocks a virtual rank holds after reduce-scatter round s - 1 (s = 0: all).
  auto held = [&](int v, int s) {
    const int m = p2 >> s;
    return blocks(v / m * m, m);
  };

  // Every step is chained after what it needs (Ctx::send's `after`), all is
  // posted at once and waited for at the end. Reduce-scatter round s sends
  // and combines within what round s - 1 combined.
  std::vector<RequestPtr> all, sends(static_cast<size_t>(rounds));
  RequestPtr combined;  // the last round's receive so far
  for (int s = 0; s < rounds; ++s) {
    const int pv = vr ^ (p2 >> (s + 1));
    const int peer = real(pv);
    const Piece give = held(pv, s + 1), keep = held(vr, s + 1);
    if (give.count) {
      sends[s] = c.send(peer, static_cast<uint32_t>(s), local + give.begin * esize, give.count * esize, {combined.get()});
      all.push_back(sends[s]);
    }
    if (keep.count) {
      Combine cb = make_combine(dtype, op, local + keep.begin * esize, /*local_first=*/vr < pv);
      combined = c.recv(peer, static_cast<uint32_t>(s), out + keep.begin * esize, keep.count * esize, &cb,
                        {combined.get()});
      all.push_back(combined);
    }
    local = out;
  }
  if (op == HPU_AVG) {
    if (combined) c.wait(combined);
    const Piece mine = held(vr, rounds);
    finish_average(out + mine.begin * esize, mine.count, dtype, op, n);
  }
  // Allgather round s sends all this rank holds by then (its block, and what
  // the later rounds brought) and receives where round s of the
  // reduce-scatter sent from.
  std::vector<Request *> holds = {combined.get()};
  for (int s = rounds - 1; s >= 0; --s) {
    const int pv = vr ^ (p2 >> (s + 1));
    const int peer = real(pv);
    const Piece have = held(vr, s + 1), get = held(pv, s + 1);
    const auto step = static_cast<uint32_t>(rounds + s);
    if (have.count) all.push_back(c.send(peer, step, out + have.begin * esize, have.count * esize, holds));
    if (get.count) {
      all.push_back(c.recv(peer, step, out + get.begin * esize, get.count * esize, nullptr, {sends[s].get()}));
      holds.push_back(all.back().get());
    }
  }
  c.wait(all);
  all.clear();
  if (r < 2 * extra) c.wait(c.send(r - 1, kResult, recv, bytes));
}

}  // namespace hpu::comm
