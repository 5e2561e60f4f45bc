#include "comm/collectives.hpp"

#include <cstring>

#include "core/runtime.hpp"

namespace hpu::comm {

namespace {

enum class Algo { rule, ring, tree, recursive_doubling, direct };

Algo forced() {
  const std::string &a = config().comm.algo;
  if (a == "ring") return Algo::ring;
  if (a == "tree") return Algo::tree;
  if (a == "recursive_doubling") return Algo::recursive_doubling;
  if (a == "direct") return Algo::direct;
  return Algo::rule;
}

void copy(void *dst, const void *src, size_t bytes) {
  if (dst != src && bytes) std::memcpy(dst, src, bytes);
}

}  // namespace

void allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const size_t bytes = count * dtype_bytes(dtype);
  if (c.size() == 1 || count == 0) return copy(recv, send, bytes);
  Algo a = forced();
  if (a == Algo::direct && !c.shares_address_space()) a = Algo::rule;
  if (a == Algo::rule) {
    const bool direct = c.shares_address_space() && bytes * static_cast<size_t>(c.size()) > kDirectMinBytes;
    a = direct ? Algo::direct : bytes <= kSmallBytes ? Algo::recursive_doubling : Algo::ring;
  }
  switch (a) {
    case Algo::direct:
      return direct_allreduce(c, send, recv, count, dtype, op);
    case Algo::recursive_doubling:
      return recursive_doubling_allreduce(c, send, recv, count, dtype, op);
    case Algo::tree:
      tree_reduce(c, send, recv, count, dtype, op, 0);
      return tree_broadcast(c, recv, recv, bytes, 0);
    default:
      return ring_allreduce(c, send, recv, count, dtype, op);
  }
}

void broadcast(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, int root) {
  const size_t bytes = count * dtype_bytes(dtype);
  if (c.size() == 1 || count == 0) return copy(recv, send, bytes);
  Algo a = forced();
  if (a == Algo::tree || (a != Algo::ring && bytes <= kSmallBytes)) return tree_broadcast(c, send, recv, bytes, root);
  chain_broadcast(c, send, recv, bytes, root);
}

void reduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op, int root) {
  const size_t bytes = count * dtype_bytes(dtype);
  if (c.size() == 1 || count == 0) return copy(recv, send, bytes);
  Algo a = forced();
  if (a == Algo::tree || (a != Algo::ring && bytes <= kSmallBytes))
    return tree_reduce(c, send, recv, count, dtype, op, root);
  chain_reduce(c, send, recv, count, dtype, op, root);
}

void allgather(Ctx &c, const void *send, void *recv, size_t sendcount, hpuDataType_t dtype) {
  if (c.size() == 1 || sendcount == 0) return copy(recv, send, sendcount * dtype_bytes(dtype));
  ring_allgather(c, send, recv, sendcount, dtype);
}

void reducescatter(Ctx &c, const void *send, void *recv, size_t recvcount, hpuDataType_t dtype, hpuRedOp_t op) {
  if (c.size() == 1 || recvcount == 0) return copy(recv, send, recvcount * dtype_bytes(dtype));
  ring_reducescatter(c, send, recv, recvcount, dtype, op);
}

void alltoall(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype) {
  if (c.size() == 1 || count == 0) return copy(recv, send, count * dtype_bytes(dtype));
  pairwise_alltoall(c, send, recv, count * dtype_bytes(dtype));
}

void barrier(Ctx &c) {
  if (c.size() > 1) dissemination_barrier(c);
}

}  // namespace hpu::comm
