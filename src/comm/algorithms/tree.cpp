// Binomial trees over ranks renumbered from the root (v = r - root mod n): the
// parent of v is v with its lowest set bit cleared; its children are v + 2^k
// for every 2^k below that bit. log2(n) rounds: for small messages.
#include <cstring>

#include "comm/algorithm.hpp"

namespace hpu::comm {

namespace {

int lowest_bit_limit(int v, int n) {  // children of v are v + 2^k for 2^k < this
  return v == 0 ? n : (v & -v);
}

}  // namespace

void tree_broadcast(Ctx &c, const void *send, void *recv, size_t bytes, int root) {
  const int n = c.size(), v = mod(c.rank() - root, n);
  constexpr uint32_t kStep = 2000;  // apart from tree_reduce's steps when both run in one operation
  const void *from = recv;
  if (v == 0) {
    from = send;
  } else {
    const int parent = mod((v & (v - 1)) + root, n);
    c.wait(c.recv(parent, kStep, recv, bytes));
  }
  std::vector<RequestPtr> sends;
  for (int bit = 1; bit < lowest_bit_limit(v, n) && v + bit < n; bit <<= 1)
    sends.push_back(c.send(mod(v + bit + root, n), kStep, from, bytes));
  if (v == 0 && send != recv) std::memcpy(recv, send, bytes);
  c.wait(sends);
}

void tree_reduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op, int root) {
  const int n = c.size(), v = mod(c.rank() - root, n);
  const size_t bytes = count * dtype_bytes(dtype);
  char *acc = v == 0 ? static_cast<char *>(recv) : static_cast<char *>(c.scratch(0, bytes));
  const void *value = send;  // this subtree's value so far
  // Children in increasing order: each covers the ranks right after those
  // combined so far, so the accumulated value goes first.
  for (int bit = 1; bit < lowest_bit_limit(v, n) && v + bit < n; bit <<= 1) {
    Combine cb = make_combine(dtype, op, value, /*local_first=*/true);
    c.wait(c.recv(mod(v + bit + root, n), 0, acc, bytes, &cb));
    value = acc;
  }
  if (v == 0) {
    if (value != recv) std::memcpy(recv, value, bytes);
    finish_average(recv, count, dtype, op, n);
  } else {
    c.wait(c.send(mod((v & (v - 1)) + root, n), 0, value, bytes));
  }
}

}  // namespace hpu::comm
