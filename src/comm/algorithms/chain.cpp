// Pipelined chains: the ranks in a line from the root (broadcast) or towards
// it (reduce), the message cut in segments that flow down the line one behind
// the other, so the whole costs about one message time however many ranks.
// For large messages.
#include <cstring>

#include "comm/algorithm.hpp"

namespace hpu::comm {

namespace {

size_t segments(size_t bytes) {
  size_t k = (bytes + kSegmentBytes - 1) / kSegmentBytes;
  return k == 0 ? 1 : k;
}

}  // namespace

void chain_broadcast(Ctx &c, const void *send, void *recv, size_t bytes, int root) {
  const int n = c.size(), pos = mod(c.rank() - root, n);
  const int prev = mod(c.rank() - 1, n), next = mod(c.rank() + 1, n);
  const size_t segs = segments(bytes);
  std::vector<RequestPtr> all;
  if (pos == 0) {
    for (size_t j = 0; j < segs; ++j) {
      Piece p = split(bytes, segs, j);
      all.push_back(c.send(next, static_cast<uint32_t>(j), static_cast<const char *>(send) + p.begin, p.count));
    }
    if (send != recv) std::memcpy(recv, send, bytes);
    c.wait(all);
    return;
  }
  std::vector<RequestPtr> recvs;
  for (size_t j = 0; j < segs; ++j) {
    Piece p = split(bytes, segs, j);
    recvs.push_back(c.recv(prev, static_cast<uint32_t>(j), static_cast<char *>(recv) + p.begin, p.count));
  }
  for (size_t j = 0; j < segs; ++j) {
    c.wait(recvs[j]);
    if (pos < n - 1) {
      Piece p = split(bytes, segs, j);
      all.push_back(c.send(next, static_cast<uint32_t>(j), static_cast<char *>(recv) + p.begin, p.count));
    }
  }
  c.wait(all);
}

void chain_reduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op, int root) {
  const int n = c.size(), pos = mod(c.rank() - root - 1, n);  // the root is last
  const int prev = mod(c.rank() - 1, n), next = mod(c.rank() + 1, n);
  const size_t esize = dtype_bytes(dtype), segs = segments(count * esize);
  auto *in = static_cast<const char *>(send);
  std::vector<RequestPtr> all;
  if (pos == 0) {
    for (size_t j = 0; j < segs; ++j) {
      Piece p = split(count, segs, j);
      all.push_back(c.send(next, static_cast<uint32_t>(j), in + p.begin * esize, p.count * esize));
    }
    c.wait(all);
    return;
  }
  char *acc = pos == n - 1 ? static_cast<char *>(recv) : static_cast<char *>(c.scratch(0, count * esize));
  std::vector<RequestPtr> recvs;
  for (size_t j = 0; j < segs; ++j) {
    Piece p = split(count, segs, j);
    Combine cb = make_combine(dtype, op, in + p.begin * esize);  // the line's value so far comes first
    recvs.push_back(c.recv(prev, static_cast<uint32_t>(j), acc + p.begin * esize, p.count * esize, &cb));
  }
  for (size_t j = 0; j < segs; ++j) {
    c.wait(recvs[j]);
    if (pos < n - 1) {
      Piece p = split(count, segs, j);
      all.push_back(c.send(next, static_cast<uint32_t>(j), acc + p.begin * esize, p.count * esize));
    }
  }
  c.wait(all);
  if (pos == n - 1) finish_average(recv, count, dtype, op, n);
}

}  // namespace hpu::comm
